"""bench/eval_memory.py measures each policy's evaluation in a process of its own, on a tiny random
Llama: the peak above the loaded model, the keys and values the CPU engine kept, the same EM."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_both_engines_report_their_peak_and_play_the_same_episodes(tiny_llama_dir):
    command = [sys.executable, str(ROOT / "bench" / "eval_memory.py"), "--model", str(tiny_llama_dir),
               "--eval-tasks", "3"]  # fmt: skip
    run = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-3000:]
    rows = dict(re.findall(r"^\s*(cpu|hf): (.*)$", run.stdout, re.M))
    assert rows.keys() == {"cpu", "hf"}, run.stdout
    peak = {arm: float(re.search(r"peak \+(-?[\d.]+) GB", line).group(1)) for arm, line in rows.items()}
    assert all(v >= 0 for v in peak.values())
    kept = {arm: float(re.search(r"kept at most ([\d.]+) GB", line).group(1)) for arm, line in rows.items()}
    assert kept["hf"] == 0  # HF keeps nothing between calls
    ems = {re.search(r"EM ([\d.]+)", line).group(1) for line in rows.values()}
    assert len(ems) == 1  # greedy float32: the same episodes
    assert re.search(r"CPU engine / HF: peak increase [\d.]+x, time [\d.]+x", run.stdout)
