"""bench/cost_model.py measures each phase of a GRPO step and an evaluation beside its roofline
estimate, on a tiny random Llama."""

import json
import math
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PHASES = ("rollout", "scoring", "update", "eval")


def test_every_phase_has_a_finite_estimate_and_counts_the_episodes_it_played(tiny_llama_dir, tmp_path):
    command = [
        sys.executable,
        str(ROOT / "bench" / "cost_model.py"),
        "--quick",
        "--model",
        str(tiny_llama_dir),
    ]
    command += ["--no-progress", "--out", str(tmp_path)]
    run = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "CPU: " in run.stdout and "threads" in run.stdout and "GFLOP/s" in run.stdout
    printed = {line.split()[0]: line.split() for line in run.stdout.splitlines() if line.split()[:1]}
    for phase in PHASES:  # measured s, FLOP s, bytes s, roofline s, ratio
        assert all(float(v) >= 0 for v in printed[phase][1:6]), printed[phase]
    result = json.loads((tmp_path / "cost_model.json").read_text())
    assert result["threads"] >= 1 and result["peaks"]["float32_flops"] > 0 and result["peaks"]["bytes"] > 0
    rows = {row["phase"]: row for row in result["rows"]}
    assert list(rows) == list(PHASES)
    for phase, row in rows.items():
        estimates = [
            row[k] for k in ("measured_s", "flops", "bytes", "flops_s", "bytes_s", "roofline_s", "ratio")
        ]
        assert all(math.isfinite(v) and v > 0 for v in estimates), (phase, row)
        assert row["roofline_s"] >= max(row["flops_s"], row["bytes_s"]) * (1 - 1e-9)  # a sum of maxima
        assert math.isclose(row["ratio"], row["measured_s"] / row["roofline_s"])
        assert all(part["roofline_s"] > 0 for part in row["parts"].values()), (phase, row["parts"])
    episodes = result["episodes"]
    for phase in ("rollout", "eval"):  # what the engine was asked for is what the episodes hold
        counts, played = rows[phase]["counts"], episodes[phase]
        assert counts["episodes"] == len(played) > 0
        assert counts["generated"] == sum(e["generated_tokens"] for e in played) > 0
        assert counts["prompt_tokens"] == sum(e["prompt_tokens"] for e in played)
        assert 0 < counts["prefilled"] <= counts["prompt_tokens"]  # a shared start is prefilled once
        assert counts["decode_steps"] > 0 and 1 <= counts["batch"] <= counts["max_batch"] <= len(played)
    assert set(rows["rollout"]["parts"]) == {"prefill", "decode"}
    update = rows["update"]["counts"]
    trained = episodes["update"]
    assert update["samples"] == len(trained) == len(episodes["rollout"])  # --quick: no dynamic sampling
    assert update["policy_tokens"] == sum(e["generated_tokens"] for e in trained)
    assert update["optimizer_steps"] == 1 and update["trainable"] > 0
    assert set(rows["update"]["parts"]) == {"forward", "backward", "adamw"}
    assert rows["scoring"]["counts"]["episodes"] == len(trained)
