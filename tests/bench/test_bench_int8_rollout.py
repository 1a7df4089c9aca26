"""bench/int8_rollout.py compares int8 copies with the float32 model, on a tiny random Llama."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_copy_is_measured_and_keeping_down_projections_float_moves_the_policy_least(tiny_llama_dir):
    command = [sys.executable, str(ROOT / "bench" / "int8_rollout.py"), "--model", str(tiny_llama_dir)]
    command += ["--episodes", "2", "--repeats", "1"]
    run = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-3000:]
    rows = {}
    for line in run.stdout.splitlines():
        found = re.match(r"(int8 [\w ,]+?)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)x\s+([\d.]+)x$", line)
        if found:
            rows[found[1]] = tuple(float(v) for v in found.groups()[1:])
    assert set(rows) == {"int8 per tensor", "int8 per channel", "int8 per channel, fp32 down"}, run.stdout
    for kl, same, decode, prefill in rows.values():
        assert kl >= 0 and 0 <= same <= 1 and decode > 0 and prefill > 0
    assert rows["int8 per channel, fp32 down"][0] <= rows["int8 per channel"][0]
