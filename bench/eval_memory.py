"""Peak memory of a greedy evaluation: the CPU engine (`CachedPolicy`, which keeps each episode's
keys and values between turns) against `HFPolicy` (``model.generate`` on the whole stream every
turn, nothing kept), each playing the same dev questions with the main job's settings.

    python bench/eval_memory.py --model runs/quickstart/checkpoints/step-000000 --eval-tasks 64
    python bench/eval_memory.py --arms cpu --eval-tasks 200      # the engine alone, a whole evaluation

Each arm runs `evaluation.evaluate` (what ``searchgym train`` runs before and after GRPO) in a
process of its own, so that each peak is its own: the process's resident-set high-water mark
(``ru_maxrss``), which no sampling interval can miss.
Printed per arm: the RSS once the model is loaded, the peak during the evaluation above it, the
most keys and values the engine held in its store at the end of a call, EM and wall time; then the
CPU engine's peak increase over HF's. A peak depends on the episodes, so compare arms on the same
model and questions.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

import psutil


def _arm(model: str, policy: str, eval_tasks: int, config: str) -> dict:
    """One evaluation in this process: its memory and time."""
    import torch

    from searchgym.agents.policies.kv import PrefixStore
    from searchgym.agents.train.config import load_config
    from searchgym.agents.train.engine import load_policies
    from searchgym.agents.train.evaluation import evaluate

    overrides = [f"model={model}", f"eval_tasks={eval_tasks}", "progress=false"]
    if policy == "cpu":
        overrides.append("policy=cpu")
    else:  # the same batch; the engine's own options (rollout_dtype, cache_bytes) do not apply
        batch = load_config(config, overrides).policy_kwargs.get("max_batch_size", 64)
        overrides += [f"policy={policy}", f"policy_kwargs={{max_batch_size: {batch}}}"]
    cfg = load_config(config, overrides)
    _, engine = load_policies(cfg, torch.device("cpu"))
    loaded = psutil.Process().memory_info().rss
    kept = [0]
    add = PrefixStore.add

    def counted(store: PrefixStore, new) -> None:
        kept[0] = max(kept[0], sum(e.nbytes for e in [*store.entries, *new]))
        add(store, new)

    PrefixStore.add = counted  # type: ignore[method-assign]

    tick = time.perf_counter()
    metrics = evaluate(cfg, engine)
    seconds = time.perf_counter() - tick
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    return {"loaded": loaded, "peak": peak, "kept": kept[0], "em": metrics["em"], "seconds": seconds}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="smollm2-135m-instruct", help="a model or checkpoint directory")
    parser.add_argument("--config", default="configs/quickstart.yaml", help="settings of the evaluation")
    parser.add_argument("--eval-tasks", type=int, default=64, help="dev questions (the main job: 200)")
    parser.add_argument("--arms", default="cpu,hf", help="policies to compare, comma-separated")
    parser.add_argument("--arm", help=argparse.SUPPRESS)  # runs one arm and prints its JSON
    args = parser.parse_args()
    if args.arm:
        print(json.dumps(_arm(args.model, args.arm, args.eval_tasks, args.config)))
        return
    rows = {}
    for arm in args.arms.split(","):
        command = [sys.executable, __file__, "--arm", arm, "--model", args.model, "--config", args.config,
                   "--eval-tasks", str(args.eval_tasks)]  # fmt: skip
        run = subprocess.run(command, capture_output=True, text=True)
        if run.returncode:
            sys.exit(f"the {arm} arm failed:\n{run.stderr[-3000:]}")
        rows[arm] = row = json.loads(run.stdout.strip().splitlines()[-1])
        grew = (row["peak"] - row["loaded"]) / 1e9
        print(
            f"{arm:>4}: loaded {row['loaded'] / 1e9:.2f} GB, peak +{grew:.2f} GB "
            f"during the evaluation; keys and values kept at most {row['kept'] / 1e9:.2f} GB; "
            f"EM {row['em']:.3f} in {row['seconds']:.0f} s ({args.eval_tasks} questions)"
        )
    if {"cpu", "hf"} <= rows.keys():
        grew = {arm: max(rows[arm]["peak"] - rows[arm]["loaded"], 1) for arm in ("cpu", "hf")}
        print(f"CPU engine / HF: peak increase {grew['cpu'] / grew['hf']:.2f}x, "
              f"time {rows['cpu']['seconds'] / rows['hf']['seconds']:.2f}x")  # fmt: skip


if __name__ == "__main__":
    main()
