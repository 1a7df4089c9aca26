"""Entry point of ``searchgym/FictionalQA-Planner-v0`` (imported lazily by the registry)."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import gymnasium as gym

from searchgym.config_types import known_fields
from searchgym.envs.backends import make_retriever, world_corpus
from searchgym.envs.factories import world_tasks
from searchgym.envs.planner_env import (
    GENERATOR_PARAMS,
    PlannerEnv,
    PlannerRewards,
    PlannerTurnLimit,
)
from searchgym.envs.reader import ExtractiveReader
from searchgym.errors import ConfigError
from searchgym.generation import SamplingParams, TextGenerator


def fictional_planner(
    *,
    generator: TextGenerator | None = None,
    backend: str = "bm25",
    seed: int = 0,
    n_passages: int = 2000,
    split: str = "dev",
    hops: int | list[int] | None = None,
    generator_params: SamplingParams | dict[str, Any] | None = None,
    max_turns: int = 8,
    rewards: PlannerRewards | dict[str, Any] | None = None,
    task_set: str | None = None,
    **options: Any,
) -> gym.Env:
    """Questions about the generated world for a planner (`PlannerEnv`): it searches the world's
    corpus with ``backend`` (see `searchgym.envs.backends.make_retriever`) and finishes; then
    ``generator`` answers from what it found. ``generator`` is any `TextGenerator` (e.g. a policy:
    ``searchgym.make(id, generator=policy)``), by default the model-free `ExtractiveReader`;
    ``generator_params`` (a mapping overrides single fields of the default: greedy, 64 new tokens,
    stop at ``</answer>``) say how it samples. ``rewards`` are `PlannerRewards` or a mapping of
    their fields (``per_turn`` besides `RewardWeights`'); ``task_set`` poses other questions
    (`searchgym.envs.factories.env_tasks`); ``options`` are `PlannerEnv`'s (``protocol``, ``top_k``,
    ``max_obs_tokens``)."""
    known = set(inspect.signature(PlannerEnv).parameters) - {
        "tasks",
        "retriever",
        "generator",
        "rewards",
        "generator_params",
    }
    unknown = sorted(set(options) - known)
    if unknown:
        raise ConfigError(f"unknown env option(s) {unknown}; the options are {sorted(known | {'max_turns'})}")
    params = GENERATOR_PARAMS
    if isinstance(generator_params, dict):  # fields not given keep the defaults
        fields = known_fields(SamplingParams, generator_params, "generator_params field")
        params = dataclasses.replace(params, **fields)
    elif generator_params is not None:
        params = generator_params
    tasks = world_tasks(task_set, split, hops, seed, n_passages)
    retriever = make_retriever(backend, world_corpus(seed, n_passages))
    env = PlannerEnv(
        tasks,
        retriever,
        generator if generator is not None else ExtractiveReader(),
        rewards=PlannerRewards.parse(rewards),
        generator_params=params,
        **options,
    )
    return PlannerTurnLimit(env, max_turns)
