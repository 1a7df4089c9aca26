"""Where a GRPO step's rollout and a greedy evaluation spend their time, from one checkpoint:
arms of config overrides timed side by side, and the evaluation with and without reusing the
keys and values that episodes share (their system prompt and instructions).

    # the main job's warm start: one round of 2x the tasks against refill rounds, then 64 dev tasks
    python bench/rollout_step.py --start runs/quickstart/checkpoints/step-000000 \
        --arm "refill oversample=1" --arm "oversample2 oversample=2" --steps 3 --eval-tasks 64

An arm is a name and ``KEY=VALUE`` overrides of ``--config`` (as ``searchgym train --set``). Each
arm plays the rollout of steps 0 .. STEPS-1 (`play.play_step`, no update, so every arm samples
from the same weights); the arms alternate step by step, so that load from other processes hits
them alike. Printed per arm: seconds per step, groups played and trained (informative) per step,
episodes played per minute, informative groups per minute, and that rate as a ratio of the first
arm's (nan where the first arm trained no group). Then, with ``--eval-tasks``, the seconds of a
greedy evaluation (`evaluation.evaluate`) with the CPU engine reusing a shared start of a prompt
against reusing only an episode's own earlier stream, and whether their EM agrees.
"""

from __future__ import annotations

import argparse
import math
import shlex
import time
from types import SimpleNamespace

import torch

from searchgym.agents.policies import cached
from searchgym.agents.policies.kv import longest_prefix
from searchgym.agents.train import play, schedule
from searchgym.agents.train.config import load_config
from searchgym.agents.train.engine import load_policies
from searchgym.agents.train.evaluation import evaluate


def own_stream_only(entries, prompt):
    """The engine's matcher before cross-episode sharing: an entry only if it is all a prefix."""
    entry = longest_prefix(entries, prompt)
    return entry, len(entry.ids) if entry is not None else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--start", required=True, help="checkpoint (or model) every arm plays")
    parser.add_argument("--arm", action="append", default=[], help="'NAME KEY=VALUE ...' (repeatable)")
    parser.add_argument("--config", default="configs/quickstart.yaml")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--eval-tasks", type=int, default=0)
    args = parser.parse_args()
    one = SimpleNamespace(process_index=0, num_processes=1)
    arms = {}
    for spec in args.arm:
        name, *overrides = shlex.split(spec)
        cfg = load_config(args.config, [f"model={args.start}", "progress=false", *overrides])
        envs = [
            schedule.make_env(cfg, cfg.train_split)
            for _ in range(schedule.first_round_size(cfg, one) * cfg.group_size)
        ]
        _, tasks = schedule.split_warm_start(list(envs[0].unwrapped.tasks), cfg)
        arms[name] = SimpleNamespace(cfg=cfg, envs=envs, tasks=tasks, seconds=0.0, played=0.0, trained=0.0)
    base = next(iter(arms.values()), None)
    cfg = base.cfg if base else load_config(args.config, [f"model={args.start}", "progress=false"])
    policy, _ = load_policies(cfg, torch.device("cpu"))
    for step in range(args.steps if arms else 0):
        for name, arm in arms.items():
            tick = time.perf_counter()
            groups, metrics = play.play_step(policy, arm.envs, arm.tasks, step, arm.cfg, one)
            arm.seconds += time.perf_counter() - tick
            arm.played += metrics["rollout/groups_played"]
            arm.trained += sum(not play.is_degenerate(g) for g in groups)
            print(f"step {step} {name}: {time.perf_counter() - tick:.1f} s, {metrics}", flush=True)
    if arms:
        print(
            f"\n{'arm':<14}{'s/step':>8}{'played':>8}{'trained':>8}{'episodes/min':>14}{'groups/min':>12}{'ratio':>7}"
        )
    for name, arm in arms.items():
        rate = arm.trained / arm.seconds * 60
        ratio = rate / (base.trained / base.seconds * 60) if base.trained else math.nan
        per_step = [arm.seconds / args.steps, arm.played / args.steps, arm.trained / args.steps]
        episodes_per_min = arm.played * arm.cfg.group_size / arm.seconds * 60
        print(f"{name:<14}{per_step[0]:>8.1f}{per_step[1]:>8.2f}{per_step[2]:>8.2f}"
              f"{episodes_per_min:>14.1f}{rate:>12.2f}{ratio:>7.2f}")  # fmt: skip
    if args.eval_tasks:
        cfg = load_config(
            args.config, [f"model={args.start}", "progress=false", f"eval_tasks={args.eval_tasks}"]
        )
        results = {}
        for name, matcher in (("own stream only", own_stream_only), ("shared start", cached.shared_prefix)):
            original, cached.shared_prefix = cached.shared_prefix, matcher
            try:
                tick = time.perf_counter()
                result = evaluate(cfg, policy)
                results[name] = (time.perf_counter() - tick, result)
            finally:
                cached.shared_prefix = original
        (slow, a), (fast, b) = results.values()
        print(f"\ngreedy evaluation of {args.eval_tasks} dev tasks: own stream only {slow:.1f} s, "
              f"shared start {fast:.1f} s ({slow / fast:.2f}x); EM {a['em']:.3f} and {b['em']:.3f}, "
              f"{sum(x != y for x, y in zip(a['em_per_task'], b['em_per_task']))} tasks differ")  # fmt: skip


if __name__ == "__main__":
    main()
