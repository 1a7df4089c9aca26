"""The weights of an env's reward terms, and the pure functions that measure them.

`RewardWeights` names the weight of each step term (`step_terms`) and the episode terms; the
`searchgym.envs.rubric.Rubric` built from them sums the terms. Per step, the env measures:

- an ``answer`` step's ``outcome`` (`outcome_reward`) and ``format`` (`format_reward`);
- what a step that reaches the world charges (`charges`): ``search_calls`` and
  ``obs_tokens_1k`` (thousands of observation tokens), at once, or, with
  ``cost_only_if_correct``, all at the answer and only when the answer is exactly right;
- an invalid step measures nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from searchgym.config_types import check_field_types, known_fields
from searchgym.envs.rubric import Rubric, Term
from searchgym.errors import ConfigError
from searchgym.registry import REWARDS, TRAINER_REWARDS
from searchgym.tasks.metrics import cover_em, exact_match, f1

OutcomeMetric = Literal["em", "f1", "cover_em"]
_METRICS = {"em": exact_match, "f1": f1, "cover_em": cover_em}


@dataclass(frozen=True)
class RewardWeights:
    """The weights of the reward terms (`searchgym.envs.rubric`); costs are charged, not earned."""

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
            if name in TRAINER_REWARDS:
                raise ConfigError(
                    f"{name!r} is a trainer term: it reads the policy, so the trainer scores it and an env "
                    "cannot; weigh it in searchgym train's config, rewards: {terms: {" + name + ": ...}}"
                )
            REWARDS.spec(name)  # an unknown name fails here, suggesting the closest

    @classmethod
    def parse(cls, rewards: RewardWeights | Mapping[str, Any] | None) -> RewardWeights:
        """Weights given as the dataclass or as a mapping of its fields (from YAML or the CLI);
        an unknown field is a `ConfigError` naming the known ones.

        >>> RewardWeights.parse({"per_search": 0.1}).per_search
        0.1
        """
        if rewards is None:
            return cls()
        if isinstance(rewards, RewardWeights):
            return rewards if isinstance(rewards, cls) else cls(**asdict(rewards))
        if not isinstance(rewards, Mapping):
            raise ConfigError(f"reward weights are a mapping of their fields, got {rewards!r}")
        return cls(**known_fields(cls, dict(rewards), "reward weight"))

    def rubric(self) -> Rubric:
        """The env's rubric: its step terms (`step_terms`), then its episode terms."""
        episode = [Term(n, float(w), "episode", REWARDS.resolve(n)) for n, w in self.terms.items()]
        return Rubric((*self.step_terms(), *episode))

    def step_terms(self) -> tuple[Term, ...]:
        """The terms the env measures at every step, with these weights (costs negative)."""
        return (
            Term("outcome", float(self.outcome), doc="the answer's score against the gold answers: EM, "
                 "F1 or cover EM (rewards.outcome_metric); weight rewards.outcome"),
            Term("format", float(self.format), doc="1 when every action of the episode was one "
                 "well-formed call; weight rewards.format"),
            Term("search_calls", -self.per_search or 0.0, doc="search calls, charged at once or, with "
                 "rewards.cost_only_if_correct, at a correct answer; weight -rewards.per_search"),
            Term("obs_tokens_1k", -self.per_1k_obs_tokens or 0.0, doc="thousands of observation tokens "
                 "shown, charged as search_calls are; weight -rewards.per_1k_obs_tokens"),
        )  # fmt: skip

    def charges(self, n_calls: int, obs_tokens: int) -> dict[str, float]:
        """What a step charges for ``n_calls`` calls that showed ``obs_tokens`` tokens: nothing
        now with ``cost_only_if_correct`` (the answer charges the episode's total then).

        >>> RewardWeights().charges(1, 500), RewardWeights(cost_only_if_correct=True).charges(1, 500)
        ({'search_calls': 1.0, 'obs_tokens_1k': 0.5}, {})
        """
        return {} if self.cost_only_if_correct else usage(n_calls, obs_tokens)


def usage(n_calls: int, obs_tokens: int) -> dict[str, float]:
    """The cost terms' values for ``n_calls`` calls that showed ``obs_tokens`` tokens."""
    return {"search_calls": float(n_calls), "obs_tokens_1k": obs_tokens / 1000}


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
