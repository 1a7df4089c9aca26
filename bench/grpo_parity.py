"""A refactor of the trainer must not change its numbers: this trains a model for a few GRPO
steps under configurations that reach every part of a step (information gain, IGPO, stratified
advantages, dynamic sampling, the CPU engine, warm start + KL + costs + an episode term, a guide
with TIS, the planner) and prints a SHA-256 digest of each run's final weights and of its logged
metrics (times left out). Run it at two commits on the same machine and compare: equal digests
mean bit-identical training. Issue 37's refactor kept all nine equal.

    python bench/grpo_parity.py --model DIR --out /tmp/parity-a [--only igpo dynamic]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
from pathlib import Path

import torch
from safetensors.torch import load_file

from searchgym.agents.train.config import GRPOConfig
from searchgym.agents.train.grpo import train

BASE = dict(
    env="searchgym/FictionalQA-BM25-v0",
    env_kwargs={"n_passages": 300, "max_obs_tokens": 64},
    steps=2,
    tasks_per_step=2,
    group_size=2,
    max_turns=2,
    max_new_tokens=8,
    lr=1e-3,
    # a random model never answers right: information gain makes rewards differ
    rewards={"terms": {"info_gain": 1.0}},
    micro_batch_size=3,
    eval_tasks=2,
    checkpoint_every=2,
    progress=False,
    tensorboard=False,
)
CONFIGS = {
    "grpo_info_gain": {},
    "igpo": {"advantage": "igpo"},
    "stratified": {"advantage": "stratified"},
    "dynamic": {"dynamic_sampling": True, "oversample": 1.5, "max_refill_rounds": 1},
    "cpu_engine": {"policy": "cpu"},
    "cpu_engine_dynamic": {"policy": "cpu", "dynamic_sampling": True, "max_refill_rounds": 1},
    "warm_kl_costs_terms": {
        "warm_start_episodes": 4,
        "kl_coef": 0.1,
        "rewards": {"per_search": 0.05, "format": 0.2, "terms": {"evidence_recall": 0.3, "info_gain": 1.0}},
    },
    "guide_tis": {
        "guide": "oracle",
        "max_turns": 4,
        "tis_cap": 2.0,
        "rewards": {"per_1k_obs_tokens": 0.5, "cost_only_if_correct": True},
    },
    "planner": {
        "env": "searchgym/FictionalQA-Planner-v0",
        "env_kwargs": {"n_passages": 300},
        "rewards": {"per_turn": 0.01, "terms": {"evidence_recall": 0.5}},
    },
}


def digest(run_dir: Path, steps: int) -> tuple[str, str]:
    """SHA-256 of the final weights and of the metrics log (without its timings)."""
    weights = load_file(run_dir / "checkpoints" / f"step-{steps:06d}" / "model.safetensors")
    h = hashlib.sha256()
    for name in sorted(weights):
        h.update(name.encode())
        h.update(weights[name].float().numpy().tobytes())
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    rows = [{k: v for k, v in row.items() if not k.startswith("time/")} for row in rows]
    return h.hexdigest(), hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="the model every configuration starts from")
    parser.add_argument("--out", type=Path, required=True, help="run directories and digests.json go here")
    parser.add_argument("--only", nargs="+", choices=sorted(CONFIGS), help="these configurations only")
    args = parser.parse_args()
    results = {}
    print(f"{'configuration':<22}{'weights':>18}{'metrics':>18}")
    for name in args.only or CONFIGS:
        run_dir = args.out / name
        shutil.rmtree(run_dir, ignore_errors=True)
        torch.manual_seed(0)
        cfg = GRPOConfig(**(BASE | {"model": args.model, "run_dir": str(run_dir)} | CONFIGS[name]))
        train(cfg)
        weights, metrics = digest(run_dir, cfg.steps)
        results[name] = {"weights": weights, "metrics": metrics}
        print(f"{name:<22}{weights[:16]:>18}{metrics[:16]:>18}", flush=True)
    (args.out / "digests.json").write_text(json.dumps(results, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
