"""``searchgym plot``: a training run's curves as PNGs."""

from __future__ import annotations

import argparse
from pathlib import Path

from searchgym.agents.train.metrics_log import read_metrics
from searchgym.errors import SearchGymError
from searchgym.plots import plot_training_curves


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plot", help="draw a training run's curves from its metrics.jsonl")
    p.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="the --run-dir of a training run")
    p.add_argument("--out", type=Path, default=None, help="where the PNGs go (default RUN_DIR/plots)")
    p.add_argument("--window", type=int, default=None, help="points per moving average (default n/10)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    metrics = read_metrics(args.run_dir)
    if not any(len(row) > 1 for row in metrics):
        raise SearchGymError(f"{args.run_dir / 'metrics.jsonl'} holds no metrics yet")
    for path in plot_training_curves(metrics, args.out or args.run_dir / "plots", window=args.window):
        print(path)
    return 0
