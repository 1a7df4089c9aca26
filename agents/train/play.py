"""Playing a GRPO step's episodes: ``group_size`` sampled episodes of each task, all envs batched
into one generation call per turn (`play_groups`); with dynamic sampling (DAPO), groups without
signal are replaced by new tasks (`play_step`); with a guide, a group nobody solved gets the
guide's episode (`guided`). ``cfg`` is a `GRPOConfig`, ``engine`` the `RolloutEngine` that plays.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import torch

from searchgym.agents.play.episode import Episode
from searchgym.agents.play.programs import ProgramPlayer
from searchgym.agents.play.rollout import rollout
from searchgym.agents.policies.agent import PolicyAgent
from searchgym.agents.policies.base import SamplingParams, TokenizedPolicy
from searchgym.agents.train.advantages import degenerate_groups
from searchgym.agents.train.config import GRPOConfig
from searchgym.agents.train.schedule import drawn_tasks, first_round_size, round_seed, step_seed, step_tasks
from searchgym.agents.train.warm_start import scripted_episodes
from searchgym.errors import ConfigError
from searchgym.tasks.task import Task

Group = list[Episode]
"""The ``group_size`` episodes of one task, whose rewards GRPO compares."""


def play_groups(
    engine: TokenizedPolicy,
    envs: Sequence[gym.Env],
    tasks: Sequence[Task],
    params: SamplingParams,
    group_size: int,
    seed: int,
    on_turn: Callable[[int], None] | None = None,
) -> list[Group]:
    """``group_size`` episodes of every task sampled with ``params``, all envs in one batched
    rollout; returns the episodes grouped by task."""
    # not SamplingParams(seed=...): that seed would replay the same draws at every turn, which
    # made a policy that verifies in 44 % of its episodes do so in 6 % of them
    engine.reseed(seed)
    agents = [PolicyAgent(engine, params) for _ in envs]
    repeated = [task for task in tasks for _ in range(group_size)]
    episodes: list[Any] = [None] * len(repeated)
    for i, episode in rollout(envs, agents, repeated, seed=seed, on_turn=on_turn):
        if episode.trajectory is None:
            raise ConfigError(f"GRPO trains a local model; policy {engine.name!r} returned no tokens")
        episodes[i] = episode
    return grouped(episodes, group_size)


def play_program_groups(
    programs: ProgramPlayer,
    envs: Sequence[gym.Env],
    tasks: Sequence[Task],
    params: SamplingParams,
    group_size: int,
    seed: int,
    on_turn: Callable[[int], None] | None = None,
) -> list[Group]:
    """`play_groups` for an agent program: ``group_size`` episodes of every task, played by the
    program through the gateway, all envs at once. ``on_turn`` hears each episode's turns as it ends."""
    repeated = [task for task in tasks for _ in range(group_size)]
    heard = (lambda episode: on_turn(episode.n_turns)) if on_turn else None
    return grouped(programs.play(envs, repeated, params, seed, on_episode=heard), group_size)


def grouped(episodes: Sequence[Episode], group_size: int) -> list[Group]:
    """Consecutive runs of ``group_size`` episodes, one group per task."""
    return [list(episodes[g : g + group_size]) for g in range(0, len(episodes), group_size)]


def play_step(
    engine: TokenizedPolicy,
    envs: Sequence[gym.Env],
    train_tasks: Sequence[Task],
    step: int,
    cfg: GRPOConfig,
    accelerator: Any,
    status: Callable[[str], None] = lambda text: None,
    programs: ProgramPlayer | None = None,
) -> tuple[list[Group], dict[str, float]]:
    """The groups step ``step`` learns from, and how many were played. Without dynamic sampling,
    the step's tasks (`step_tasks`). With it (DAPO), groups whose rewards are all equal carry no
    gradient and are dropped, and further tasks (drawn by step and round, so a resumed run draws
    the same) are played in up to ``max_refill_rounds`` rounds until the step has as many
    informative groups as tasks; the first round already adds such tasks (``oversample``). The
    CPU engine keeps the trained episodes' keys and values, across rounds, for the information
    gain (the others' it frees at once): call ``engine.drop_caches()`` before the update. Refill
    rounds stop after ``max_refill_seconds`` too; ``rollout/short_groups`` counts the informative
    groups the step lacks. ``status(text)`` hears the round and the turns played, as they are.
    With ``programs``, an agent program plays the episodes (`play_program_groups`)."""
    tasks = step_tasks(train_tasks, step, cfg, accelerator)
    params = cfg.sampling
    start = time.perf_counter()
    seed = step_seed(cfg, step, accelerator)

    def play(tasks: Sequence[Task], round_: int) -> list[Group]:
        turns = 0

        def on_turn(n: int) -> None:
            nonlocal turns
            turns += n
            status(f"round {round_}: {len(tasks)} groups, {turns} turns")

        seed_now, played_envs = round_seed(seed, round_), envs[: len(tasks) * cfg.group_size]
        if programs is not None:
            return play_program_groups(
                programs, played_envs, tasks, params, cfg.group_size, seed_now, on_turn
            )
        groups = play_groups(engine, played_envs, tasks, params, cfg.group_size, seed_now, on_turn)
        return guided(engine, envs, tasks, groups, cfg, seed_now) if cfg.guide else groups

    first = list(tasks)
    if cfg.dynamic_sampling:
        first += drawn_tasks(train_tasks, first_round_size(cfg, accelerator) - len(tasks), seed, 0)
    groups = play(first, 0)
    played, degenerate = len(groups), sum(map(is_degenerate, groups))
    metrics = {}
    if cfg.dynamic_sampling:
        kept = informative(engine, groups)
        for round_ in range(1, cfg.max_refill_rounds + 1):
            missing = len(tasks) - len(kept)
            out_of_time = (
                cfg.max_refill_seconds is not None and time.perf_counter() - start > cfg.max_refill_seconds
            )
            if missing <= 0 or out_of_time:
                break
            more = play(drawn_tasks(train_tasks, missing, seed, round_), round_)
            played, degenerate = played + len(more), degenerate + sum(map(is_degenerate, more))
            kept += informative(engine, more)
        forget(engine, kept[len(tasks) :])
        groups = kept[: len(tasks)] or groups  # none informative: learn nothing from the step's own
        metrics["rollout/short_groups"] = float(max(len(tasks) - len(kept), 0))
    metrics |= {
        "rollout/degenerate_groups": degenerate / played,
        "rollout/groups_played": float(played),
        "rollout/groups_trained": float(len(groups)),
    }
    if cfg.guide:
        metrics["rollout/guided_groups"] = sum(is_guided(g[-1]) for g in groups) / len(groups)
    return groups, metrics


def guided(
    engine: TokenizedPolicy,
    envs: Sequence[gym.Env],
    tasks: Sequence[Task],
    groups: list[Group],
    cfg: GRPOConfig,
    seed: int,
) -> list[Group]:
    """``groups`` (of ``tasks``) with the last episode of each group that no sample solved
    replaced by ``cfg.guide``'s episode of its task, where that earns more than every sample did
    (see `GRPOConfig.guide`). The guide's trajectory is marked as not sampled (`is_guided`): the
    update takes the trained model's own log-probs for its tokens."""
    failed = [i for i, group in enumerate(groups) if not any(ep.em for ep in group)]
    if not failed:
        return groups
    guides = scripted_episodes(
        envs[: len(failed)], [tasks[i] for i in failed], engine.tokenizer, agent=cfg.guide, seed=seed
    )
    out = list(groups)
    for i, guide in zip(failed, guides):
        if guide.total_reward > max(ep.total_reward for ep in groups[i]):
            forget(engine, [groups[i][-1:]])
            guide.trajectory.sampled = False
            out[i] = [*groups[i][:-1], guide]
    return out


def is_guided(episode: Episode) -> bool:
    """Whether ``episode`` is a guide's (`guided`), not the policy's own."""
    return not episode.trajectory.sampled


def informative(engine: TokenizedPolicy, groups: Sequence[Group]) -> list[Group]:
    """The groups whose rewards differ; what the engine kept of the others' episodes is freed."""
    forget(engine, [g for g in groups if is_degenerate(g)])
    return [g for g in groups if not is_degenerate(g)]


def forget(engine: TokenizedPolicy, groups: Sequence[Group]) -> None:
    """Free what the engine kept of these groups' episodes, which the step will not train on (a
    program's episodes were freed as they ended)."""
    for group in groups:
        for episode in group:
            if episode.trajectory is not None:
                engine.forget(episode.trajectory.prompt_ids + episode.trajectory.ids)


def is_degenerate(group: Group) -> bool:
    """All episodes of the group earned the same reward: its advantages are all zero."""
    return bool(degenerate_groups(torch.tensor([[ep.total_reward for ep in group]], dtype=torch.float64))[0])
