"""Rewards as a rubric: named, weighted terms, each logged as its own component.

Every env reports its built-in terms step by step, with the weights of `RewardWeights`: ``outcome``
(the answer's EM/F1), ``format`` (every action well formed) and ``cost`` (per search and per 1,000
observation tokens, or only on a correct answer). Episode terms come on top: any function of the
finished episode, ``fn(episode: EpisodeRecord) -> float``, named in ``RewardWeights.terms`` as
``{name: weight}`` where ``name`` is registered (`searchgym.register_reward`) or ``module:attr``.
`Rubric` scores them once, when the episode ends (answered or truncated): the step's reward gains
``weight * fn(episode)`` and ``info["reward_components"][name]`` is ``fn(episode)``. The trainer
adds ``info_gain`` (IGPO), which needs the policy itself.

>>> from searchgym.tasks.task import Task
>>> episode = EpisodeRecord(Task("t", "q?", ("Paris",), evidence=("d1", "d2")), [{"doc_ids": ["d1", "d9"]}])
>>> evidence_recall(episode)
0.5
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from searchgym.registry import REWARDS
from searchgym.tasks.task import Task


@dataclass(frozen=True)
class EpisodeRecord:
    """A finished episode as reward terms see it: the task, every step's ``info`` and action and
    observation, and the final answer (None if the episode was truncated unanswered)."""

    task: Task
    infos: list[dict[str, Any]]
    actions: list[str] = field(default_factory=list)
    observations: list[str] = field(default_factory=list)
    prediction: str | None = None
    truncated: bool = False

    @property
    def n_searches(self) -> int:
        return sum(info.get("tool") == "search" for info in self.infos)

    @property
    def retrieved(self) -> set[str]:
        """Ids of every document a search showed."""
        return {doc_id for info in self.infos for doc_id in info.get("doc_ids") or ()}


RewardFn = Callable[[EpisodeRecord], float]


def evidence_recall(episode: EpisodeRecord) -> float:
    """The share of the task's gold evidence documents that the agent's searches showed it (0 for
    a task without evidence): a dense signal for finding the right passages."""
    evidence = set(episode.task.evidence)
    return len(evidence & episode.retrieved) / len(evidence) if evidence else 0.0


def resolve_terms(terms: Mapping[str, float]) -> list[tuple[str, float, RewardFn]]:
    """``(name, weight, fn)`` for each of ``terms``; an unknown name is a `ConfigError`."""
    return [(name, float(weight), REWARDS.resolve(name)) for name, weight in terms.items()]


class Rubric(gym.Wrapper[str, str, str, str]):
    """Add episode reward terms (``[(name, weight, fn), ...]``) to the step that ends an episode."""

    def __init__(self, env: gym.Env[str, str], terms: list[tuple[str, float, RewardFn]]) -> None:
        super().__init__(env)
        self.terms = terms
        self._task: Task | None = None
        self._steps: list[tuple[str, str, dict[str, Any]]] = []

    def reset(self, **kwargs: Any) -> tuple[str, dict[str, Any]]:
        observation, info = self.env.reset(**kwargs)
        self._task, self._steps = info["task"], []
        return observation, info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, info = self.env.step(action)
        self._steps.append((action, observation, info))
        if not (terminated or truncated):
            return observation, reward, terminated, truncated, info
        assert self._task is not None
        record = EpisodeRecord(
            self._task,
            [step[2] for step in self._steps],
            [step[0] for step in self._steps],
            [step[1] for step in self._steps],
            prediction=info.get("prediction"),
            truncated=bool(truncated),
        )
        components = dict(info["reward_components"])
        for name, weight, fn in self.terms:
            value = float(fn(record))
            components[name] = value
            reward += weight * value
        info["reward_components"] = components
        return observation, reward, terminated, truncated, info


def with_rubric(env: gym.Env[str, str]) -> gym.Env[str, str]:
    """``env`` under a `Rubric` of its reward weights' episode terms (``env`` itself if none)."""
    terms = getattr(getattr(env.unwrapped, "rewards", None), "terms", None)
    return Rubric(env, resolve_terms(terms)) if terms else env
