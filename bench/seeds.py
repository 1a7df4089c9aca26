"""The main job on several seeds, one after another, each as a user runs it (`searchgym train
--config CONFIG --set seed=S`), with what the results page reports of each: GRPO's paired gain and
its interval, the wall time and where it went, the peak memory, and why a seed fell short (the
sampled entropy, the share of degenerate groups, the failure kinds after GRPO).

    python bench/seeds.py                                       # configs/quickstart.yaml, seeds 0 1 2
    python bench/seeds.py --seeds 1 2 --set warm_start_episodes=96 --out runs/seeds-w96
    python bench/seeds.py --runs runs/quickstart /tmp/exp/main_s2  # tabulate runs made elsewhere

Each seed's run is OUT/seed-S (its stdout and stderr in OUT/seed-S.log); a run whose summary.json
is there is not played again, so a killed study continues with the seed it stopped in (afresh).
Wall time and peak RSS are the child process's own (``os.wait4``), written to
OUT/seed-S/process.json; for runs made elsewhere (``--runs``) they are read from that file or
from ``/usr/bin/time -v``'s report in RUN_DIR.log, where either is there.
Run it on otherwise idle cores: a learning run's steps slow down up to 8x beside another job, and
the times are the point.

Printed per run: EM before and after GRPO with 95 % intervals, the paired gain, wall time (warm
start, evaluations, GRPO steps), peak RSS, the sampled entropy a token (first step, then the range
over the rest), the share of groups played that were degenerate (first step, last step, mean), and
the three commonest failure kinds after GRPO. Written: OUT/seeds.json and OUT/seeds.png (each
run's EM before and after, its gain with the interval).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from searchgym.agents.train.metrics_log import read_metrics
from searchgym.commands.train import phase_times

PROCESS_FILE = "process.json"


def run_seed(config: Path, seed: int, out: Path, overrides: list[str]) -> Path:
    """``searchgym train`` on ``seed`` in OUT/seed-S, unless its summary is there; its run dir."""
    run_dir = out / f"seed-{seed}"
    if (run_dir / "summary.json").is_file():
        return run_dir
    command = [sys.executable, "-m", "searchgym.cli", "train", "--config", str(config), "--no-progress"]
    for override in [f"seed={seed}", f"run_dir={run_dir}", "overwrite=true", *overrides]:
        command += ["--set", override]
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    with open(out / f"seed-{seed}.log", "w") as log:
        child = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise SystemExit(f"seed {seed}: searchgym train exited with {code}; its output is in {log.name}")
    process = {"wall_s": wall, "peak_rss_gb": usage.ru_maxrss * 1024 / 1e9, "command": command}
    (run_dir / PROCESS_FILE).write_text(json.dumps(process, indent=1))
    return run_dir


def describe(run_dir: Path) -> dict[str, Any]:
    """What the results page reports of one finished run."""
    summary = json.loads((run_dir / "summary.json").read_text())
    config = json.loads((run_dir / "config.json").read_text())
    steps = [row for row in read_metrics(run_dir) if "time/step_s" in row]
    process_file = run_dir / PROCESS_FILE
    process = json.loads(process_file.read_text()) if process_file.is_file() else timed(run_dir)
    entropy = [row["loss/entropy"] for row in steps if "loss/entropy" in row]
    degenerate = [row["rollout/degenerate_groups"] for row in steps if "rollout/degenerate_groups" in row]
    failures = (summary.get("eval_after") or {}).get("failures") or {}
    kinds = sorted(failures.get("kinds", {}).items(), key=lambda kv: -kv[1]["count"])
    return {
        "run_dir": str(run_dir),
        "seed": config["seed"],
        "before": _em(summary.get("eval_before")),
        "after": _em(summary.get("eval_after")),
        "gain": summary.get("grpo_vs_start"),
        "wall_s": process.get("wall_s", summary.get("wall_s")),
        "phase_s": summary.get("phase_s", {}),
        "peak_rss_gb": process.get("peak_rss_gb"),
        "steps": len(steps),
        "entropy": entropy,
        "degenerate": degenerate,
        "failed": failures.get("failed"),
        "kinds": {name: value["count"] for name, value in kinds},
    }


def timed(run_dir: Path) -> dict[str, float]:
    """Wall time and peak RSS from ``/usr/bin/time -v``'s report in RUN_DIR.log, where there is one."""
    log = run_dir.with_name(run_dir.name + ".log")
    text = log.read_text(errors="replace") if log.is_file() else ""
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", text)
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)", text)
    if not (rss and wall):
        return {}
    seconds = sum(float(part) * 60**i for i, part in enumerate(reversed(wall.group(1).split(":"))))
    return {"wall_s": seconds, "peak_rss_gb": int(rss.group(1)) * 1024 / 1e9}


def _em(metrics: dict | None) -> list[float] | None:
    return [metrics["em"], metrics["em_low"], metrics["em_high"]] if metrics else None


def row(d: dict[str, Any]) -> str:
    """One run as a line of the printed table."""

    def em(value: list[float] | None) -> str:
        return f"{value[0]:.3f} [{value[1]:.3f}, {value[2]:.3f}]" if value else "-"

    gain = d["gain"]
    gain_text = (
        f"{gain['em_diff']:+.3f} [{gain['em_diff_low']:+.3f}, {gain['em_diff_high']:+.3f}]" if gain else "-"
    )
    time_text = f"{d['wall_s'] / 60:.1f} min{phase_times(d['phase_s'])}" if d["wall_s"] else "-"
    rss = f"{d['peak_rss_gb']:.1f} GB" if d["peak_rss_gb"] else "-"
    entropy = d["entropy"]
    entropy_text = (
        f"{entropy[0]:.2f}, then {min(entropy[1:]):.2f}-{max(entropy[1:]):.2f}" if len(entropy) > 1 else "-"
    )
    degenerate = d["degenerate"]
    degenerate_text = (
        f"{degenerate[0]:.0%} -> {degenerate[-1]:.0%} (mean {sum(degenerate) / len(degenerate):.0%})"
        if degenerate
        else "-"
    )
    kinds = ", ".join(f"{name} {count}" for name, count in list(d["kinds"].items())[:3]) or "-"
    return (
        f"{_label(d).replace(chr(10), ', ')}  before {em(d['before'])}  after {em(d['after'])}  "
        f"gain {gain_text}\n"
        f"    {time_text}, peak {rss}; entropy/token {entropy_text}; degenerate groups {degenerate_text}\n"
        f"    failures after: {d['failed'] if d['failed'] is not None else '-'} ({kinds})"
    )


def plot(described: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ems, gains) = plt.subplots(1, 2, figsize=(2 + 2.4 * len(described), 3.6))
    labels = [_label(d) for d in described]
    for i, d in enumerate(described):
        for when, offset, colour in (("before", -0.12, "0.6"), ("after", 0.12, "C0")):
            if d[when]:
                em, low, high = d[when]
                label = when if i == 0 else None
                ems.errorbar(
                    i + offset, em, [[em - low], [high - em]], fmt="o", color=colour, capsize=3, label=label
                )
        if d["gain"]:
            g = d["gain"]
            error = [[g["em_diff"] - g["em_diff_low"]], [g["em_diff_high"] - g["em_diff"]]]
            gains.errorbar(i, g["em_diff"], error, fmt="o", color="C1", capsize=3)
    ems.set_ylabel("dev EM (95 % CI)")
    ems.legend(fontsize=8)
    gains.axhline(0, color="0.5", lw=0.8)
    gains.axhline(0.1, color="C2", lw=0.8, ls="--")
    gains.set_ylabel("gain of GRPO (paired 95 % CI)")
    for ax in (ems, gains):
        ax.set_xticks(range(len(labels)), labels, fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _label(d: dict[str, Any]) -> str:
    """``seed S`` for this script's runs, the run directory's name and seed for others."""
    name = Path(d["run_dir"]).name
    return f"seed {d['seed']}" if name == f"seed-{d['seed']}" else f"{name}\nseed {d['seed']}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path, default=Path("configs/quickstart.yaml"))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="for every seed")
    parser.add_argument("--out", type=Path, default=Path("runs/seeds"))
    parser.add_argument(
        "--runs", type=Path, nargs="+", help="tabulate these finished runs instead of training"
    )
    args = parser.parse_args()

    run_dirs = args.runs or [run_seed(args.config, seed, args.out, args.set) for seed in args.seeds]
    described = [describe(run_dir) for run_dir in run_dirs]
    for d in described:
        print(row(d))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "seeds.json").write_text(json.dumps(described, indent=1))
    plot(described, args.out / "seeds.png")
    print(f"wrote {args.out / 'seeds.json'} and {args.out / 'seeds.png'}")


if __name__ == "__main__":
    main()
