"""bench/train.py --quick times GRPO steps of searchgym and of trl on a tiny random Llama."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_quick_run_times_both_trainers_and_prints_the_ratio(tmp_path):
    command = [sys.executable, str(ROOT / "bench" / "train.py"), "--quick", "--warmup", "1", "--steps", "1"]
    command += ["--tasks-per-step", "2", "--group-size", "2", "--threads", "1", "--no-progress"]
    command += ["--out", str(tmp_path)]
    run = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.splitlines()
    assert any(line.split()[:1] == ["searchgym"] for line in lines), run.stdout
    assert any(line.split()[:1] == ["trl"] for line in lines), run.stdout
    assert "ratio searchgym/trl:" in run.stdout and "x rollout tokens/s" in run.stdout

    results = json.loads((tmp_path / "train.json").read_text())
    ours, peer = results["sides"]["searchgym"], results["sides"]["trl"]
    for side in (ours, peer):
        assert len(side["raw"]["step_s"]) == 2  # the warm-up step and the timed one
        assert side["step_s"] == side["raw"]["step_s"][1] > 0
        assert 0 < side["rollout_s"] < side["step_s"]
        assert side["tokens"] > 0 and side["peak_rss_mb"] > 0 and side["raw"]["torch_threads"] == 1
        assert side["episodes_per_min"] == pytest.approx(60 * 4 / side["step_s"])
        assert side["rollout_tok_s"] == pytest.approx(side["tokens"] / side["rollout_s"])
        assert side["update_tok_s"] == pytest.approx(side["tokens"] / (side["step_s"] - side["rollout_s"]))
    assert results["ratio_step"] == pytest.approx(ours["step_s"] / peer["step_s"])
    # the same work on both sides: 2 tasks x 2 episodes, at most 8 tokens a turn, 2-hop tool-call env
    assert results["settings"]["env_kwargs"]["protocol"] == "tool_calls"
    assert ours["tokens"] <= 4 * 2 * 8 and peer["tokens"] <= 4 * (2 + 1) * 8
