"""Which tasks, envs and seeds each GRPO step uses: all of it follows from the config and the
step's number, so a resumed run plays exactly what the uninterrupted run would have played.

The seeds mix the run's seed, the epoch, the step, the process and the refill round with
different primes (`RUN_PRIME`, `STEP_PRIME`, `PROCESS_PRIME`), so that no two of them draw the
same stream. ``cfg`` is a `GRPOConfig`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import torch

from searchgym.agents.train.config import GRPOConfig
from searchgym.envs.registry import make
from searchgym.errors import ConfigError
from searchgym.tasks.task import Task

RUN_PRIME = 1_000_003
"""Multiplies the run's seed in a step's seed (and, with `STEP_PRIME`, an epoch's shuffle)."""
STEP_PRIME = 7_919
"""Multiplies the step (or, in an epoch's shuffle, the run's seed)."""
PROCESS_PRIME = 104_729
"""Multiplies the process index in a step's seed, and the refill round in a round's seed."""
DRAW_PRIME = 31
"""Multiplies a step's seed in the generator that draws its refill tasks."""


def make_env(cfg: GRPOConfig, split: str) -> gym.Env:
    """``cfg.env`` on ``split``, with the run's turn limit, env options and reward weights (and,
    on the eval split, the evaluations' own env options)."""
    kwargs = {"split": split, "max_turns": cfg.max_turns, **env_kwargs(cfg, split)}
    if cfg.env_rewards:
        kwargs["rewards"] = cfg.env_rewards
    return make(cfg.env, **kwargs)


def env_kwargs(cfg: GRPOConfig, split: str) -> dict[str, Any]:
    """The env options of ``split``: ``env_kwargs``, with ``eval_env_kwargs`` over them on the eval split."""
    return cfg.env_kwargs | cfg.eval_env_kwargs if split == cfg.eval_split else dict(cfg.env_kwargs)


def check_splits_apart(cfg: GRPOConfig) -> None:
    """`ConfigError` when the tasks `train` evaluates share questions with those it trains on: its
    dev EM would then measure recall of trained answers. A user's env registered with one plain
    task list serves the same questions as every split, so this is where that is caught."""
    if not (cfg.eval_tasks and cfg.steps + cfg.warm_start_episodes):
        return
    train_env, eval_env = make_env(cfg, cfg.train_split), make_env(cfg, cfg.eval_split)
    trained = {t.question.strip().lower() for t in train_env.unwrapped.tasks}
    evaluated = list(eval_env.unwrapped.tasks)[: cfg.eval_tasks]
    shared = [t.question for t in evaluated if t.question.strip().lower() in trained]
    train_env.close()
    eval_env.close()
    if shared:
        raise ConfigError(
            f"{len(shared)} of the {len(evaluated)} {cfg.eval_split!r} questions that train evaluates are "
            f"also {cfg.train_split!r} questions of {cfg.env} (e.g. {shared[0]!r}), so its dev EM would "
            "measure memorised answers: register the env with tasks={'train': [...], 'dev': [...]} (a plain "
            'list serves every split), give each line of a questions file (task_set) its "split" field, '
            "or set train_split and eval_split to splits that do not overlap"
        )


def per_process(n: int, accelerator: Any) -> int:
    if n % accelerator.num_processes:
        raise ConfigError(f"{n} tasks cannot be split evenly over {accelerator.num_processes} processes")
    return n // accelerator.num_processes


def split_warm_start(tasks: Sequence[Task], cfg: GRPOConfig) -> tuple[list[Task], list[Task]]:
    """``(warm-start tasks, GRPO tasks)``: the first ``warm_start_episodes`` of a seeded shuffle
    are imitated; GRPO trains on the others, so that RL does not replay questions SFT memorised
    (a memorised question is solved in every sample of its group and teaches nothing). GRPO
    keeps every task when the warm start uses them all."""
    order = torch.randperm(len(tasks), generator=torch.Generator().manual_seed(cfg.seed)).tolist()
    chosen = set(order[: cfg.warm_start_episodes])
    rest = [t for i, t in enumerate(tasks) if i not in chosen]
    return [tasks[i] for i in order[: cfg.warm_start_episodes]], rest or list(tasks)


def step_tasks(tasks: Sequence[Task], step: int, cfg: GRPOConfig, accelerator: Any) -> list[Task]:
    """This process's share of step ``step``'s tasks: a fresh seeded shuffle of the training
    tasks each epoch, consumed in order, so any step's tasks follow from its number (resume)."""
    per_step, out = cfg.tasks_per_step, []
    for position in range(step * per_step, (step + 1) * per_step):
        epoch, i = divmod(position, len(tasks))
        shuffle = torch.Generator().manual_seed(cfg.seed * STEP_PRIME + epoch)
        out.append(tasks[int(torch.randperm(len(tasks), generator=shuffle)[i])])
    share = per_process(per_step, accelerator)
    return out[accelerator.process_index * share : (accelerator.process_index + 1) * share]


def first_round_size(cfg: GRPOConfig, accelerator: Any) -> int:
    """Groups this process plays side by side in a step's first round: its share of the step's
    tasks, times ``oversample`` under dynamic sampling."""
    share = per_process(cfg.tasks_per_step, accelerator)
    return math.ceil(share * cfg.oversample) if cfg.dynamic_sampling else share


def step_seed(cfg: GRPOConfig, step: int, accelerator: Any) -> int:
    """The sampling seed of this process's first round of step ``step``."""
    return (cfg.seed * RUN_PRIME + step * STEP_PRIME + accelerator.process_index * PROCESS_PRIME) % 2**31


def round_seed(seed: int, round_: int) -> int:
    """The sampling seed of refill round ``round_`` of the step whose seed is ``seed``."""
    return seed + round_ * PROCESS_PRIME


def drawn_tasks(tasks: Sequence[Task], n: int, seed: int, round_: int) -> list[Task]:
    """``n`` tasks drawn (with replacement) for refill round ``round_`` of the step seeded ``seed``."""
    rng = torch.Generator().manual_seed(seed * DRAW_PRIME + round_)
    return [tasks[int(i)] for i in torch.randint(len(tasks), (n,), generator=rng)]


def step_lr(cfg: GRPOConfig, step: int) -> float:
    """The learning rate of step ``step`` (from 0): ``lr`` after ``lr_warmup_steps`` steps of a
    linear rise.

    >>> from types import SimpleNamespace
    >>> cfg = SimpleNamespace(lr=1e-4, lr_warmup_steps=3)
    >>> [round(step_lr(cfg, step) / cfg.lr, 2) for step in range(5)]
    [0.25, 0.5, 0.75, 1.0, 1.0]
    """
    return cfg.lr * min(1.0, (step + 1) / (cfg.lr_warmup_steps + 1))
