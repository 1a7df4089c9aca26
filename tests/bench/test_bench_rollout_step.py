"""bench/rollout_step.py times a step's rollout per arm and an evaluation with and without the
shared-start reuse, on a tiny random Llama."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_arms_are_timed_side_by_side_and_the_evaluations_agree(tiny_llama_dir):
    small = "tasks_per_step=1 group_size=2 max_new_tokens=4 'env_kwargs={hops: [2], n_passages: 300}'"
    command = [sys.executable, str(ROOT / "bench" / "rollout_step.py"), "--start", str(tiny_llama_dir)]
    command += ["--arm", f"refill oversample=1 {small}", "--arm", f"twice oversample=2 {small}"]
    command += ["--steps", "1", "--eval-tasks", "2"]
    run = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-3000:]
    rows = {line.split()[0]: line.split()[1:] for line in run.stdout.splitlines() if line.strip()}
    assert float(rows["refill"][1]) >= 1.0 and float(rows["refill"][3]) > 0  # groups, episodes/min
    assert float(rows["twice"][1]) >= 2.0  # played: the first round alone has 2 tasks
    assert "greedy evaluation of 2 dev tasks" in run.stdout and "0 tasks differ" in run.stdout
