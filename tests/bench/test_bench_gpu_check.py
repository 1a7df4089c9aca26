"""bench/gpu_check.py --device cpu: every part of the GPU check runs, on CPU, with the same code."""

import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = str(ROOT / "bench" / "gpu_check.py")
PARTS = ("hf-policy", "cached-policy", "eval", "train", "resume", "sft-simulator", "trl-grpo")


@pytest.mark.slow
def test_every_part_passes_on_cpu_and_takes_the_cpu_side_of_each_branch(tmp_path):
    run = subprocess.run(
        [sys.executable, SCRIPT, "--device", "cpu", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert run.stdout.startswith("device cpu (CPU), torch ")
    table = run.stdout[run.stdout.index("\npart ") :]
    rows = {m[1]: m[2] for m in re.finditer(r"^([\w-]+)\s+(pass|skip|FAIL)\s+[\d.]+\s+[\d.]+  ", table, re.M)}
    assert rows == dict.fromkeys(PARTS, "pass"), table
    assert "peak RSS MiB" in table and f"{len(PARTS)} passed, 0 failed" in table
    assert "cpu float32, 48 tokens sampled, RNG untouched" in table
    assert "0 CUDA RNG states in checkpoint" in table and "step 2: loss" in table
    assert "use_cpu True, bf16 False" in table  # trl's GRPO trainer
    assert re.search(r"^sft-simulator .*  cpu, float32, losses \[", table, re.M)
    assert (tmp_path / "grpo" / "checkpoints" / "step-000002").is_dir()


@pytest.mark.skipif(torch.cuda.is_available(), reason="the check runs for real where there is a GPU")
def test_asking_for_cuda_without_a_gpu_is_a_usage_error():
    command = [sys.executable, SCRIPT, "--device", "cuda"]
    run = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and "torch sees no CUDA device" in run.stderr
