"""GRPO data-parallel under `accelerate launch`: two CPU processes train one model."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from searchgym.agents.train.metrics_log import read_metrics


@pytest.mark.slow
def test_two_cpu_processes_train_with_accelerate_launch(tiny_llama_dir, tmp_path):
    accelerate = Path(sys.executable).parent / "accelerate"
    if not accelerate.exists():
        accelerate = shutil.which("accelerate")
    config = {
        "model": str(tiny_llama_dir),
        "env_kwargs": {"n_passages": 300, "max_obs_tokens": 64},
        "steps": 1,
        "tasks_per_step": 2,  # one task per process
        "group_size": 2,
        "max_turns": 2,
        "max_new_tokens": 8,
        "lr": 1e-3,
        "rewards": {"terms": {"info_gain": 1.0}},
        "eval_tasks": 2,
        "keep_checkpoints": 3,
        "progress": False,
        "tensorboard": False,
    }
    path = tmp_path / "config.yaml"
    path.write_text(json.dumps(config))  # JSON is YAML
    run_dir = tmp_path / "run"
    command = [str(accelerate), "launch", "--cpu", "--num_processes", "2", "--num_machines", "1",
               "--mixed_precision", "no", "--dynamo_backend", "no",
               "-m", "searchgym.cli", "train", "--config", str(path), "--run-dir", str(run_dir)]  # fmt: skip
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"}
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.count("before GRPO") == result.stdout.count("after GRPO") == 1  # main process only

    rows = [r for r in read_metrics(run_dir) if "loss/policy" in r]
    assert len(rows) == 1 and torch.isfinite(torch.tensor(rows[0]["loss/policy"]))
    evals = [r for r in read_metrics(run_dir) if "eval/n" in r]
    assert [r["eval/n"] for r in evals] == [2, 2]  # the two processes evaluated one task each
    start = load_file(run_dir / "checkpoints" / "step-000000" / "model.safetensors")
    end = load_file(run_dir / "checkpoints" / "step-000001" / "model.safetensors")
    assert any(not torch.equal(start[k], end[k]) for k in start)
