"""Reward studies: GRPO arms trained from one warm-started checkpoint, each evaluated greedily on the
same dev tasks, compared paired with the start and with the first arm.

    # the information-gain study (docs/results.md; the checkpoint is the main job's warm start)
    python bench/reward_study.py --start runs/quickstart/checkpoints/step-000000 --out runs/study \
        --arm "outcome rewards.terms.info_gain=0" --arm "info_gain rewards.terms.info_gain=1.0" \
        --arm "igpo rewards.terms.info_gain=1.0 advantage=igpo" \
        --arm "outcome_20 rewards.terms.info_gain=0 steps=20"

An arm is a name and ``KEY=VALUE`` overrides (as ``searchgym train --set``, quoted where a value
has spaces) of ``--config`` with ``eval_tasks=0 steps=STEPS``: ``searchgym train`` from the same
start, so the arms differ only in their overrides. A start that is a run's step-0 checkpoint (its
warm start) is copied into each arm's run and resumed with that run's model, seed and
``warm_start_episodes``: GRPO then trains on the tasks that run's GRPO had, not on those its warm
start memorised. Any other start is a model, trained with ``model=START warm_start_episodes=0``
on every training task. An arm's run is OUT/NAME/run and its evaluation OUT/NAME/eval.json; an arm
whose evaluation is on disk is not played again, so a killed study continues where it stopped (and
a finished arm can be put there). The start is evaluated once, as OUT/start/eval.json.

Printed: per arm, dev EM with its 95 % bootstrap interval, searches, and the training wall time
(the sum of its steps' ``time/step_s``, so arms can be compared at equal time); then each arm's
paired EM difference with the start and with the first arm (95 % paired bootstrap, the same
tasks). Written: OUT/study.json and OUT/study.png (EM with intervals, per arm).
"""

from __future__ import annotations

import argparse
import functools
import json
import shlex
import shutil
from pathlib import Path

import torch

from searchgym.agents.train.checkpoint import MARKER, checkpoint_dir, latest_checkpoint
from searchgym.agents.train.config import load_config
from searchgym.agents.train.engine import load_policies
from searchgym.agents.train.evaluation import evaluate, paired_difference
from searchgym.agents.train.grpo import train
from searchgym.agents.train.metrics_log import read_metrics


def parse_arm(spec: str) -> tuple[str, list[str]]:
    name, *overrides = shlex.split(spec)
    if not overrides or not all("=" in o for o in overrides):
        raise SystemExit(
            f"--arm {spec!r}: give a name, then KEY=VALUE overrides, "
            "e.g. --arm 'ig rewards.terms.info_gain=1.0'"
        )
    return name, overrides


def evaluated(path: Path, run) -> dict:
    """The evaluation stored at ``path``, or ``run()``'s, stored there."""
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(run()))
    return json.loads(path.read_text())


def evaluate_checkpoint(args, checkpoint: str) -> dict:
    """Greedy dev metrics of ``checkpoint``, loaded as training loads it (backend, chat template)."""
    cfg = load_config(args.config, [f"model={checkpoint}", f"eval_tasks={args.eval_tasks}", *args.set])
    _, rollout_policy = load_policies(cfg, torch.device("cpu"))
    return evaluate(cfg, rollout_policy)


def started_run(start: Path) -> dict | None:
    """The config of the run whose step-0 checkpoint ``start`` is, or None (a model directory)."""
    config = start.parent.parent / "config.json"
    is_step_0 = start.name == checkpoint_dir(start.parent.parent, 0).name and (start / MARKER).is_file()
    return json.loads(config.read_text()) if is_step_0 and config.is_file() else None


def train_arm(args, name: str, overrides: list[str]) -> dict:
    run_dir = args.out / name / "run"
    common = ["eval_tasks=0", f"steps={args.steps}", *args.set]
    started = started_run(Path(args.start))
    if started is None:  # a model: GRPO from its weights, on every training task
        base = [f"model={args.start}", "warm_start_episodes=0", *common]
    else:  # a run's start: resumed, so GRPO leaves out the tasks its warm start imitated, as that run did
        if not (run_dir / "checkpoints").is_dir():
            shutil.copytree(args.start, checkpoint_dir(run_dir, 0))
        keep = ("model", "seed", "warm_start_episodes")
        base = [f"{key}={json.dumps(started[key])}" for key in keep] + common
    resume = latest_checkpoint(run_dir) is not None  # a killed arm continues; a run's start resumes
    cfg = load_config(args.config, [*base, f"run_dir={run_dir}", f"resume={resume}", *overrides])
    final = run_dir / "checkpoints" / f"step-{cfg.steps:06d}"  # the last step is always saved
    if not final.is_dir():
        train(cfg)
    result = evaluate_checkpoint(args, str(final))
    result["train_s"] = sum(row.get("time/step_s", 0.0) for row in read_metrics(run_dir))
    result["steps"] = cfg.steps
    return result


def plot(results: dict[str, dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(results)
    ems = [results[n]["em"] for n in names]
    errors = [
        [e - results[n]["em_low"] for n, e in zip(names, ems)],
        [results[n]["em_high"] - e for n, e in zip(names, ems)],
    ]
    fig, ax = plt.subplots(figsize=(1.8 + 1.1 * len(names), 3.6))
    bars = ax.bar(names, ems, yerr=errors, capsize=4, color=["0.6"] + ["C0"] * (len(names) - 1))
    ax.bar_label(bars, fmt="%.3f", fontsize=7, padding=8)
    ax.set_ylabel(f"dev EM (n={results[names[0]]['n']}, 95 % CI)")
    ax.set_ylim(0, 1)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--start", required=True, help="the checkpoint every arm starts from")
    parser.add_argument("--arm", action="append", required=True, help="'NAME KEY=VALUE ...' (repeatable)")
    parser.add_argument("--config", default="configs/quickstart.yaml")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="for every arm")
    parser.add_argument("--steps", type=int, default=15)
    parser.add_argument("--eval-tasks", type=int, default=200)
    parser.add_argument("--out", type=Path, default=Path("runs/study"))
    args = parser.parse_args()
    arms = dict(parse_arm(spec) for spec in args.arm)

    results = {
        "start": evaluated(args.out / "start" / "eval.json", lambda: evaluate_checkpoint(args, args.start))
    }
    for name, overrides in arms.items():
        results[name] = evaluated(
            args.out / name / "eval.json", functools.partial(train_arm, args, name, overrides)
        )

    print(f"{'arm':14s} {'EM [95 % CI]':>22s} {'searches':>9s} {'steps':>6s} {'train s':>8s}")
    for name, r in results.items():
        ci = f"{r['em']:.3f} [{r['em_low']:.3f}, {r['em_high']:.3f}]"
        print(f"{name:14s} {ci:>22s} {r['searches']:9.2f} {r.get('steps', 0):6d} {r.get('train_s', 0):8.0f}")
    first = next(iter(arms))
    comparisons = {}
    for name in arms:
        for base in ("start", first):
            if base != name:
                d = comparisons[f"{name} - {base}"] = paired_difference(results[base], results[name])
                low, high = d["em_diff_low"], d["em_diff_high"]
                print(f"{name} - {base}: {d['em_diff']:+.3f} [{low:+.3f}, {high:+.3f}]")
    (args.out / "study.json").write_text(json.dumps({"arms": results, "paired": comparisons}, indent=1))
    plot(results, args.out / "study.png")
    print(f"wrote {args.out / 'study.json'} and {args.out / 'study.png'}")


if __name__ == "__main__":
    main()
