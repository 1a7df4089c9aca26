"""What searchgym's rollout, evaluation and trainer read from an environment, declared.

- ``env.reset`` returns a `ResetInfo`; agents read its ``task`` and ``protocol``.
- ``env.step`` returns a `StepInfo`: the tool the step ran (or the reason it was invalid), the
  reward components and the episode's counters; the step that answers adds `AnswerInfo`.
- A trainable env (``searchgym train``, ``searchgym eval``) exposes ``env.unwrapped.tasks`` (a
  sequence of `Task`) and ``env.unwrapped.protocol`` (its action protocol) and takes ``split``,
  ``max_turns`` and ``rewards`` keyword arguments.

`TextEnv` and every env built with `searchgym.register(id, tasks=..., retriever=...)` report all of
it; `check_env_contract` checks any env, and the rollout checks every step.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

import gymnasium as gym

from searchgym.envs.protocols import ActionProtocol
from searchgym.envs.rubric import Rubric
from searchgym.errors import EnvContractError
from searchgym.tasks.task import Task


class ResetInfo(TypedDict):
    task: Task
    task_id: str
    question: str
    protocol: ActionProtocol
    """The action protocol: agents write their actions in it (``protocol.stop`` ends a turn)."""
    turn: int


class StepInfo(TypedDict):
    turn: int
    tool: str | None
    """The tool the step called (``search``, ``answer``, ``open``, …); None for an invalid action."""
    error: str | None
    """Why the action was invalid, or why its tool failed; None otherwise."""
    reward_components: dict[str, float]
    """Each reward term's value at this step; the step's reward is their weighted sum."""
    n_searches: int
    n_invalid: int
    n_errors: int
    obs_tokens: int
    """Counters of the episode so far: searches, invalid actions, tool failures, observation tokens."""


class AnswerInfo(TypedDict):
    prediction: str
    em: float
    f1: float
    cover_em: float
    evidence_recall: float | None


_HOW = {
    "reward_components": 'report {"outcome": ..., ...}: the reward terms whose weighted sum is the reward',
    "tool": "report the tool the action called, or None for an invalid action",
    "error": "report why an invalid action was invalid, else None",
}


def _check_keys(info: Mapping[str, Any], declared: type, where: str, env: object) -> None:
    missing = [key for key in declared.__annotations__ if key not in info]
    if missing:
        how = "; ".join(f"{key}: {_HOW[key]}" for key in missing if key in _HOW)
        raise EnvContractError(
            f"{_name(env)}'s {where} info lacks {', '.join(map(repr, missing))}, which searchgym reads "
            f"(searchgym.envs.contract.{declared.__name__}). Add {'it' if len(missing) == 1 else 'them'} to "
            f"the info dict{f' ({how})' if how else ''}, or build the env on searchgym.envs.TextEnv, "
            "or with searchgym.register(id, tasks=..., retriever=...), which report them all"
        )


def check_reset_info(info: Mapping[str, Any], env: object = None) -> None:
    _check_keys(info, ResetInfo, "reset", env)


def check_step_info(info: Mapping[str, Any], env: object = None) -> None:
    """Raise `EnvContractError` naming the keys of `StepInfo` (and, at an answer, `AnswerInfo`)
    that ``info`` lacks."""
    _check_keys(info, StepInfo, "step", env)
    if "prediction" in info:
        _check_keys(info, AnswerInfo, "answer step", env)


def check_trainable_env(env: gym.Env) -> Sequence[Task]:
    """The env's tasks, if it exposes ``tasks`` and ``protocol`` as a trainable env must."""
    inner = env.unwrapped
    tasks = getattr(inner, "tasks", None)
    if not isinstance(tasks, Sequence) or not tasks or not all(isinstance(t, Task) for t in tasks[:1]):
        raise EnvContractError(
            f"{_name(env)} exposes no tasks: set self.tasks to a non-empty sequence of searchgym.tasks.Task "
            "(searchgym eval samples them, searchgym train trains on them)"
        )
    if not isinstance(getattr(inner, "protocol", None), ActionProtocol):
        raise EnvContractError(
            f"{_name(env)} exposes no action protocol: set self.protocol to "
            "searchgym.envs.make_protocol('tags') or make_protocol('tool_calls') (agents write actions in "
            "it; the trainer stops turns on its stop strings)"
        )
    return tasks


def env_rubric(env: gym.Env) -> Rubric:
    """The env's reward terms (``env.unwrapped.rubric``, as every searchgym env has), or none for
    an env of yours without one: its reward is then its own, and its ``reward_components`` are
    logged under the names it gives them."""
    rubric = getattr(env.unwrapped, "rubric", None)
    return rubric if isinstance(rubric, Rubric) else Rubric(())


def check_env_contract(env: gym.Env, action: str = "<answer> unknown </answer>") -> None:
    """Reset ``env``, play ``action`` (by default an answer) and check everything searchgym reads:
    `check_trainable_env`, `ResetInfo` and `StepInfo`."""
    check_trainable_env(env)
    _, info = env.reset(seed=0)
    check_reset_info(info, env)
    *_, info = env.step(action)
    check_step_info(info, env)


def _name(env: object) -> str:
    spec = getattr(env, "spec", None)
    return spec.id if spec is not None else type(getattr(env, "unwrapped", env)).__name__
