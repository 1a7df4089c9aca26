"""Reward components as small pure functions, and the weights that combine them.

Per step, the env reports each component and their weighted sum:

- a ``search`` step costs ``per_search + per_1k_obs_tokens * obs_tokens / 1000`` (charged at once,
  or, with ``cost_only_if_correct``, all at the answer and only when the answer is exactly right);
- the ``answer`` step earns ``outcome * outcome_metric(prediction) + format * format_score``;
- an invalid step earns nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from searchgym.config_types import check_field_types
from searchgym.errors import ConfigError
from searchgym.registry import REWARDS
from searchgym.tasks.metrics import cover_em, exact_match, f1

OutcomeMetric = Literal["em", "f1", "cover_em"]
_METRICS = {"em": exact_match, "f1": f1, "cover_em": cover_em}


@dataclass(frozen=True)
class RewardWeights:
    """How reward components combine into the scalar reward."""

    outcome_metric: OutcomeMetric = "em"
    """Score of the final answer: exact match, token F1, or gold contained in the answer."""
    outcome: float = 1.0
    """Weight of the outcome score."""
    format: float = 0.0
    """Weight of the format score (1 when every action of the episode was well formed)."""
    per_search: float = 0.0
    """Cost of one search call (λ_call)."""
    per_1k_obs_tokens: float = 0.0
    """Cost of 1,000 observation tokens shown to the agent (λ_tok), counted as the limits count
    them (`searchgym.envs.observations.count_tokens`: words and marks, at least one per 6 characters)."""
    cost_only_if_correct: bool = False
    """Charge the cost only on an exactly correct answer (LightSearcher), at the answer step."""
    terms: Mapping[str, float] = field(default_factory=dict)
    """Episode reward terms ``{name: weight}``, scored when the episode ends (`searchgym.envs.rubric`):
    ``name`` is a registered reward function (``searchgym.list_rewards()``) or ``module:attr``."""

    def __post_init__(self) -> None:
        check_field_types(self)
        if self.outcome_metric not in _METRICS:
            raise ConfigError(
                f"outcome_metric must be one of {sorted(_METRICS)}, got {self.outcome_metric!r}"
            )
        for name in ("per_search", "per_1k_obs_tokens"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} is a cost and must be >= 0, got {getattr(self, name)}")
        if not isinstance(self.terms, Mapping):
            raise ConfigError(
                f"terms maps reward names to weights, e.g. {{evidence_recall: 0.1}}; got {self.terms!r}"
            )
        for name, weight in self.terms.items():
            if isinstance(weight, bool) or not isinstance(weight, (int, float)):
                raise ConfigError(f"the weight of reward term {name!r} must be a number, got {weight!r}")
            REWARDS.spec(name)  # an unknown name fails here, suggesting the closest


def outcome_reward(prediction: str, answers: Sequence[str], metric: OutcomeMetric = "em") -> float:
    """Score a final answer against the gold answers.

    >>> outcome_reward("The Eiffel Tower", ["Eiffel Tower"]), outcome_reward("Paris, France", ["Paris"], "f1")
    (1.0, 0.6666666666666666)
    """
    return _METRICS[metric](prediction, answers)


def format_reward(n_invalid: int, n_extra_calls: int) -> float:
    """1.0 when every action of the episode was a single well-formed call, else 0.0.

    >>> format_reward(0, 0), format_reward(1, 0), format_reward(0, 2)
    (1.0, 0.0, 0.0)
    """
    return float(n_invalid == 0 and n_extra_calls == 0)


def search_cost(n_searches: int, obs_tokens: int, weights: RewardWeights) -> float:
    """The (positive) cost of ``n_searches`` calls that showed ``obs_tokens`` tokens.

    >>> search_cost(2, 500, RewardWeights(per_search=0.1, per_1k_obs_tokens=0.2))
    0.30000000000000004
    """
    return weights.per_search * n_searches + weights.per_1k_obs_tokens * obs_tokens / 1000


def combine(outcome: float, format_score: float, cost: float, weights: RewardWeights) -> float:
    """The scalar reward of one step from its components.

    >>> combine(1.0, 1.0, 0.5, RewardWeights(format=0.25))
    0.75
    """
    return weights.outcome * outcome + weights.format * format_score - cost
