"""``searchgym rescore``: a training run's saved episodes under another rubric, without a model."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "rescore",
        help="replay a training run's saved episodes under other reward weights, and rank its groups again",
        description=(
            "Replays every saved rollout episode of RUN_DIR in the run's env made with the new reward "
            "weights (--set rewards=... or rewards.KEY=..., and advantage), reweighs the trainer terms "
            "the episodes saved, and compares each step's rewards and each complete group's advantages "
            "with the run's. "
            "Needs no model; writes a run directory that `searchgym view` opens beside the old one."
        ),
    )
    p.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="the --run-dir of a training run")
    p.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", dest="overrides",
        help="the new weights, as train's --set: rewards={...}, rewards.terms.NAME=W, advantage=...",
    )  # fmt: skip
    p.add_argument(
        "--out", type=Path, default=None, help="where the rescored run goes (default RUN_DIR/rescore)"
    )
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from searchgym.agents.train.rescore import rescore  # lazy: torch

    out = args.out or args.run_dir / "rescore"
    report = rescore(args.run_dir, args.overrides, out, progress=not args.no_progress)
    print(format_report(report))
    print(f"episodes, metrics.jsonl and rescore.json in {out}")
    return 0


def format_report(report: dict[str, Any]) -> str:
    """A row per step: its saved episodes, the mean reward before, after and as training logged
    it, and over complete groups the informative ones before and after and the pairs flipped."""
    header = ["step", "episodes", "reward", "rescored", "logged", "informative", "pairs flipped"]
    rows = [header]
    for s in report["steps"]:
        informative = f"{s['informative_old']} -> {s['informative_new']} of {s['complete_groups']}"
        rows.append([
            str(s["step"]), str(s["episodes"]), f"{s['reward_old']:.4f}", f"{s['reward_new']:.4f}",
            "-" if s["reward_logged"] is None else f"{s['reward_logged']:.4f}",
            informative if s["complete_groups"] else "-",
            f"{s['pairs_flipped']:.0%}" if s["complete_groups"] else "-",
        ])  # fmt: skip
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = [f"rewards {report['old_rewards']} -> {report['new_rewards']}"]
    return "\n".join(lines + ["  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in rows])
