"""``searchgym train``: GRPO (after an optional SFT warm start) from a YAML config."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from searchgym.agents.play.failures import format_card
from searchgym.agents.train.config import load_config
from searchgym.agents.train.metrics_log import read_metrics
from searchgym.commands.common import check_agents
from searchgym.errors import ConfigError, import_optional
from searchgym.plots import plot_training_curves


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train", help="train a policy with GRPO on an environment (see configs/)")
    p.add_argument("--config", type=Path, default=None, help="YAML config (keys of GRPOConfig)")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config key, value read as YAML (e.g. --set steps=20 --set env_kwargs={hops:[2]})",
    )
    p.add_argument("--run-dir", default=None, help="where checkpoints, metrics and plots go")
    p.add_argument("--resume", action="store_true", help="continue from the newest checkpoint in the run dir")
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="start afresh in a run dir that holds checkpoints (not --resume)",
    )
    p.add_argument(
        "--program",
        default=None,
        metavar="MODULE:FUNCTION",
        help="train your own agent program (or file.py:function) on the env: run(question, client, tools), "
        "its model calls recorded by a gateway (the config key program; see docs/programs.md)",
    )
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from searchgym.agents.train.grpo import train  # lazy: torch and transformers (2.2 s), only for training

    overrides = list(args.set)
    if args.run_dir:
        overrides.append(f"run_dir={args.run_dir}")
    if args.resume:
        overrides.append("resume=true")
    if args.overwrite:
        overrides.append("overwrite=true")
    if args.no_progress:
        overrides.append("progress=false")
    if args.program:
        overrides.append(f"program={json.dumps(args.program)}")  # JSON: a YAML string, colons and all
    cfg = load_config(args.config, overrides)
    check_before_loading(cfg)
    labels = {"base": "as loaded", "before": "after SFT" if cfg.warm_start_episodes else "before GRPO"}
    labels["after"] = "after GRPO"

    reported = set()

    def report(when: str, metrics: dict) -> None:
        """One line per evaluation as it ends, above the progress bars."""
        from tqdm.auto import tqdm

        reported.add(when)
        interval = f"[{metrics['em_low']:.3f}, {metrics['em_high']:.3f}]"
        tqdm.write(
            f"dev {labels.get(when, when):>11}: EM {metrics['em']:.3f} {interval}  F1 {metrics['f1']:.3f}  "
            f"searches {metrics['searches']:.2f}  invalid {metrics['invalid_rate']:.3f}  "
            f"errors {metrics.get('errors', 0.0):.3f}  (n {metrics['n']:.0f})"
        )
        if metrics.get("failures"):
            tqdm.write(format_card(f"{'why':>15}", metrics["failures"]))  # under its EM line
        if metrics.get("warning"):
            tqdm.write(metrics["warning"])

    summary = train(cfg, on_eval=report)
    if summary["is_main_process"]:
        for when in labels:  # a resumed run's evaluations from before it stopped
            if when not in reported and summary[f"eval_{when}"]:
                report(when, summary[f"eval_{when}"])
        if summary["grpo_vs_start"]:
            d = summary["grpo_vs_start"]
            print(
                f"gain of GRPO: EM {d['em_diff']:+.3f} [{d['em_diff_low']:+.3f}, {d['em_diff_high']:+.3f}] "
                "(paired 95% bootstrap interval over the same dev tasks)"
            )
        if summary.get("already_finished"):
            return 0  # train said so and changed nothing, nor do its plots
        plots = plot_training_curves(read_metrics(cfg.run_dir), Path(cfg.run_dir) / "plots")
        print(
            f"{cfg.steps} steps in {summary['wall_s']:.0f} s{phase_times(summary['phase_s'])}; metrics, "
            f"checkpoints and {len(plots)} plots in {cfg.run_dir}"
        )
    return 0


def phase_times(phase_s: dict[str, float]) -> str:
    """Where a run's time went, as `` (warm start 361 s, evaluations 530 s, GRPO steps 902 s)``.

    >>> phase_times({"warm_start": 361.2, "eval_before": 265.0, "grpo_steps": 902.4, "eval_after": 265.3})
    ' (warm start 361 s, evaluations 530 s, GRPO steps 902 s)'
    """
    evals = sum(s for phase, s in phase_s.items() if phase.startswith("eval_"))
    parts = [("warm start", phase_s.get("warm_start")), ("evaluations", evals or None)]
    parts.append(("GRPO steps", phase_s.get("grpo_steps")))
    shown = [f"{name} {s:.0f} s" for name, s in parts if s]
    return f" ({', '.join(shown)})" if shown else ""


def check_before_loading(cfg: Any) -> None:
    """What `train` would find wrong only once its model and envs had loaded, checked at once: the
    step's tasks split evenly over the processes of ``accelerate launch``, vLLM is installed for
    ``rollout_engine: vllm``, and the warm start's agent and the guide can be made."""
    processes = int(os.environ.get("WORLD_SIZE", "1"))  # set by accelerate launch
    if cfg.tasks_per_step % processes:
        raise ConfigError(
            f"tasks_per_step {cfg.tasks_per_step} cannot be split evenly over the {processes} processes of "
            f"accelerate launch; make it a multiple of {processes}"
        )
    if cfg.rollout_engine == "vllm":
        import_optional("vllm", "gpu")
    if cfg.warm_start_episodes:
        check_agents([cfg.warm_start_agent], cfg.seed, flag="warm_start_agent")
    if cfg.guide is not None:
        check_agents([cfg.guide], cfg.seed, flag="guide")
