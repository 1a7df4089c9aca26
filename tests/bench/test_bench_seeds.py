"""bench/seeds.py runs the job once per seed as a user would and reports each run's gain, time,
memory and why it fell short; run again, it reads the finished runs back."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_each_seed_runs_once_and_is_reported(tiny_llama_dir, tmp_path):
    config = tmp_path / "tiny.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "model": str(tiny_llama_dir),
                "env": "searchgym/FictionalQA-BM25-v0",
                "env_kwargs": {"n_passages": 300, "max_obs_tokens": 64},
                "steps": 2,
                "tasks_per_step": 2,
                "group_size": 2,
                "max_turns": 2,
                "max_new_tokens": 4,
                "rewards": {"terms": {"info_gain": 1.0}},
                "warm_start_episodes": 4,
                "warm_start_batch_size": 2,
                "eval_tasks": 4,
                "tensorboard": False,
            }
        )
    )
    out = tmp_path / "seeds"
    command = [sys.executable, str(ROOT / "bench" / "seeds.py"), "--config", str(config), "--out", str(out)]
    command += ["--seeds", "0", "1", "--set", "lr=1.0e-3"]
    first = subprocess.run(command, capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert first.returncode == 0, first.stderr[-3000:]

    described = json.loads((out / "seeds.json").read_text())
    assert [d["seed"] for d in described] == [0, 1]
    for d in described:
        run = Path(d["run_dir"])
        assert json.loads((run / "config.json").read_text())["lr"] == 1e-3  # --set reaches every seed
        assert d["steps"] == 2 and len(d["entropy"]) == len(d["degenerate"]) == 2
        assert d["before"][0] == json.loads((run / "summary.json").read_text())["eval_before"]["em"]
        assert d["gain"] is not None and 0 < d["peak_rss_gb"] < 64 and d["wall_s"] > 0
        assert set(d["phase_s"]) >= {"warm_start", "eval_before", "grpo_steps", "eval_after"}
    assert (out / "seeds.png").stat().st_size > 0
    assert first.stdout.count("gain ") == 2 and "peak" in first.stdout

    logs = {p: p.stat().st_mtime_ns for p in out.glob("seed-*.log")}
    again = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert again.returncode == 0, again.stderr[-3000:]
    assert {p: p.stat().st_mtime_ns for p in out.glob("seed-*.log")} == logs  # nothing trained again
    assert json.loads((out / "seeds.json").read_text()) == described
