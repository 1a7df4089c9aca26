"""bench/reward_study.py from a run's warm start: each arm resumes a copy of it and trains on the
tasks that run's GRPO had, not on those its warm start imitated."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from searchgym.agents.train.config import GRPOConfig
from searchgym.agents.train.grpo import train
from searchgym.agents.train.schedule import make_env, split_warm_start

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_arms_from_a_runs_warm_start_leave_out_its_tasks(tiny_llama_dir, tmp_path):
    values = dict(
        model=str(tiny_llama_dir),
        env="searchgym/FictionalQA-BM25-v0",
        env_kwargs={"n_passages": 300, "max_obs_tokens": 64, "hops": [1]},
        seed=3,
        tasks_per_step=2,
        group_size=2,
        max_turns=2,
        max_new_tokens=4,
        rewards={"terms": {"info_gain": 1.0}},
        log_episodes=4,
        progress=False,
        tensorboard=False,
    )
    start_run = tmp_path / "start"
    warm = GRPOConfig(**values, run_dir=str(start_run), warm_start_episodes=40, steps=0, eval_tasks=0)
    train(warm)
    config = tmp_path / "study.yaml"
    config.write_text(yaml.safe_dump(values | {"seed": 0, "warm_start_episodes": 0, "lr": 1e-3}))

    command = [sys.executable, str(ROOT / "bench" / "reward_study.py"), "--config", str(config)]
    command += ["--start", str(start_run / "checkpoints" / "step-000000"), "--out", str(tmp_path / "study")]
    command += ["--arm", "a lr=1.0e-4", "--steps", "2", "--eval-tasks", "2"]
    run = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-3000:]

    arm = tmp_path / "study" / "a" / "run"
    saved = json.loads((arm / "config.json").read_text())
    assert (saved["model"], saved["seed"], saved["warm_start_episodes"]) == (str(tiny_llama_dir), 3, 40)
    assert saved["lr"] == 1e-4
    assert sorted(p.name for p in (arm / "checkpoints").iterdir()) == ["step-000000", "step-000002"]
    imitated, _ = split_warm_start(list(make_env(warm, "train").unwrapped.tasks), warm)
    played = {json.loads(line)["question"] for f in (arm / "episodes").iterdir() for line in f.open()}
    assert played and not played & {t.question for t in imitated}
