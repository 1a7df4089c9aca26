"""Any searchgym env for verifiers (PyPI ``verifiers``): the parts of the adapter that do not
import verifiers.

verifiers 0.4 (the ``verifiers.v1`` API) loads a *taskset* by id: ``vf-eval searchgym ...``
imports the module ``searchgym`` and takes the `Taskset` and `Harness` subclasses its ``__all__``
exports, which ``searchgym/__init__.py`` forwards, lazily, to
`searchgym.agents.integrations.verifiers.v0_4`. It is built from these parts:

- the tasks (`env_tasks`): the env's own, or the ``n`` that ``searchgym eval --n N --seed S``
  plays, each reset with ``seed + i`` as eval resets it; the prompt is the env's first
  observation (its instructions and the question);
- the tools: the env's `Tool` definitions, each call played through `EnvSession.call`, so
  retrieval, invalid arguments, costs and the turn limit are exactly the env's; the model reads
  `tool_result`;
- the rewards (`reward_weights`): the terms of the env's rubric (outcome, format, the costs and
  any episode terms), each under its own name with the env's weight, so that their weighted sum
  is the env's summed episode reward.

Env options (``split``, ``hops``, ``protocol``, ``rewards``, ...) are the keyword arguments of
``searchgym.make``, as ``searchgym eval -E key=value`` passes them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym

from searchgym.agents.play.episode import Episode
from searchgym.agents.play.rollout import sample_tasks
from searchgym.agents.play.session import EPISODE_OVER, EnvSession, Step, TaskStart, task_starts, tool_message
from searchgym.envs.registry import DEFAULT_ENV
from searchgym.errors import ConfigError

INSTALL = 'pip install "searchgym[verifiers]"'

__all__ = [
    "DEFAULT_ENV",
    "EPISODE_OVER",
    "env_tasks",
    "episode_components",
    "play",
    "reward_weights",
    "tool_result",
]


def env_tasks(session: EnvSession, n: int | None = None, seed: int = 0) -> list[TaskStart]:
    """The env's tasks, or the ``n`` that ``searchgym eval --n N --seed SEED`` plays, in its order;
    task ``i`` is reset with ``seed + i``, as eval resets it."""
    if n is not None and n < 1:
        raise ConfigError(f"n must be at least 1 (or None for all the env's tasks), got {n}")
    return task_starts(session, None if n is None else sample_tasks(session.tasks, n, seed), seed)


def reward_weights(env: gym.Env) -> dict[str, float]:
    """The weight of each term of the env's rubric (`searchgym.envs.rubric.Rubric`), whose value
    the env reports in ``info["reward_components"]``: an episode's reward is the weighted sum of
    its summed components (costs have negative weights).

    >>> import searchgym
    >>> rewards = {"format": 0.1, "per_search": 0.05, "terms": {"evidence_recall": 0.5}}
    >>> reward_weights(searchgym.make(DEFAULT_ENV, rewards=rewards))
    {'outcome': 1.0, 'format': 0.1, 'search_calls': -0.05, 'obs_tokens_1k': 0.0, 'evidence_recall': 0.5}
    """
    rubric = getattr(env.unwrapped, "rubric", None)
    if rubric is None:
        raise ConfigError(
            f"the verifiers adapter hands over the env's rubric; {type(env.unwrapped).__name__} has none: "
            "use a searchgym env id, or give your env a searchgym.envs.rubric.Rubric as .rubric"
        )
    return rubric.weights()


def tool_result(session: EnvSession, step: Step) -> str:
    """What the model reads after a tool call: the env's observation without its result tags,
    and the end of the episode when there is one."""
    return tool_message(session.protocol, step.observation, step.terminated, step.truncated)


def play(session: EnvSession, name: str, arguments: Mapping[str, Any]) -> str:
    """Play one tool call in ``session`` and return `tool_result`; a call after the episode is
    over steps nothing and says so. Unknown tools or arguments raise `ValueError` (nothing played)."""
    if session.done:
        return EPISODE_OVER
    return tool_result(session, session.call(name, arguments))


def episode_components(episode: Episode | None, names: Sequence[str]) -> dict[str, float]:
    """Each named reward component summed over ``episode`` (0 for a component it has not reported
    yet, or for no episode at all: a rollout that never called a tool earned nothing)."""
    components = episode.reward_components if episode is not None else {}
    return {name: float(components.get(name, 0.0)) for name in names}
