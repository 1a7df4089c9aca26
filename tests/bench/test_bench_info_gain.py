"""bench/info_gain.py scores one step's episodes three ways, on a tiny random Llama."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_three_ways_agree_and_the_engines_reads_the_fewest_tokens(tiny_llama_dir):
    command = [sys.executable, str(ROOT / "bench" / "info_gain.py"), "--model", str(tiny_llama_dir)]
    command += ["--episodes", "3", "--repeats", "1"]
    run = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-3000:]
    rows = {}
    for line in run.stdout.splitlines():
        found = re.match(
            r"(\w+)\s+[\d.]+ s\s+([\d.]+)x engine's\s+\(reads about ([\d,]+) tokens.*: (\S+)\)", line
        )
        if found:
            name, ratio, tokens, difference = found.groups()
            rows[name] = (float(ratio), int(tokens.replace(",", "")), float(difference))
    assert set(rows) == {"engine", "searchgym", "rows"}, run.stdout
    assert rows["engine"][0] == 1.0  # the ratios' base
    assert rows["engine"][1] < rows["searchgym"][1] < rows["rows"][1]
    assert all(difference < 1e-4 for _, _, difference in rows.values())
