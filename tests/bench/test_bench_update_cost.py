"""bench/update_cost.py runs the trainer's update per trainable_layers arm, on a tiny random Llama."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_training_fewer_blocks_trains_fewer_parameters_and_keeps_fewer_activations(tiny_llama_dir):
    command = [sys.executable, str(ROOT / "bench" / "update_cost.py"), "--model", str(tiny_llama_dir)]
    command += ["--layers", "0,1", "--episodes", "2", "--tokens", "256", "--prompt", "16"]
    command += ["--policy-tokens", "4", "--turns", "2", "--rounds", "1", "--share", "both"]
    run = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-3000:]
    rows = {line.split()[0]: line.split()[1:] for line in run.stdout.splitlines() if "MiB" in line}
    every, top = rows["all"], rows["1"]
    assert float(top[0].rstrip("M")) < float(every[0].rstrip("M"))  # parameters
    assert float(every[2]) == 1.0  # the first arm is the ratios' base
    assert float(top[3]) < float(every[3])  # MiB saved for backward
    assert rows["all:shared"][0] == every[0] and rows["1:shared"][0] == top[0]  # prompts read once
