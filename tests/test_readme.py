"""The README's first lines are the two commands a new user runs; keep them true."""

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def readme_commands() -> list[str]:
    block = re.search(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), re.S).group(1)
    return [line for line in block.splitlines() if line.strip() and not line.startswith("#")]


def test_two_commands_with_the_same_setup_as_ci():
    main_job, tests = readme_commands()
    setup = main_job.rsplit(" && ", 1)[0]
    assert tests.rsplit(" && ", 1)[0] == setup
    assert "torch==2.13.0" in setup  # never an unpinned torch: it would pull CUDA on a CPU machine
    ci = (ROOT / ".ci" / "run").read_text()
    install = setup.split(" && ")[-1].replace("pip install", "pip install --quiet")
    assert install in ci
    assert tests.rsplit(" && ", 1)[1] in ci


@pytest.mark.slow
def test_quickstart_main_job_runs(tmp_path):
    """The README's main job, shortened (one GRPO step, a few warm-start episodes and dev tasks)
    but otherwise as written: the real SmolLM2, the quickstart config, the printed report."""
    main_job, _ = readme_commands()
    run = shlex.split(main_job.rsplit(" && ", 1)[1])
    assert run[:2] == ["searchgym", "train"]
    exe = Path(sys.executable).parent / "searchgym"
    shorter = ["steps=1", "warm_start_episodes=4", "eval_tasks=4", "tasks_per_step=2", "group_size=2"]
    command = [str(exe), *run[1:], "--run-dir", str(tmp_path / "run"), "--no-progress"]
    for item in shorter:
        command += ["--set", item]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=env, timeout=1800)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    for when in ("as loaded", "after SFT", "after GRPO"):  # SmolLM2, then warm-started, then trained
        [line] = [x for x in lines if x.startswith("dev") and when in x]
        em = float(line.split("EM")[1].split()[0])
        assert 0 <= em <= 1
    plots = {p.name for p in (tmp_path / "run" / "plots").iterdir()}
    assert {"reward.png", "loss.png", "rollout.png", "eval.png"} <= plots
    assert (tmp_path / "run" / "checkpoints" / "step-000001" / "model.safetensors").is_file()


def test_usage_example_runs(capsys):
    block = re.search(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S).group(1)
    namespace: dict = {}
    exec(compile(block, "README.md", "exec"), namespace)
    info = namespace["info"]
    assert namespace["terminated"] and info["n_searches"] == 1 and info["em"] in (0.0, 1.0)
    assert capsys.readouterr().out.startswith(info["prediction"])


def readme_block(heading: str, language: str, index: int = 0) -> str:
    """The ``index``-th ``language`` code block under the README heading ``heading``."""
    text = (ROOT / "README.md").read_text()
    section = text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(rf"```{language}\n(.*?)```", section, re.S)[index]


def test_your_own_env_agent_and_reward_run_as_written(tmp_path, tiny_llama_dir):
    """The custom-env section verbatim: mylab.py, then its eval and train commands (train on the tiny
    random Llama instead of SmolLM2, through the `--set model=PATH` the section names)."""
    (tmp_path / "mylab.py").write_text(readme_block("Your own env, agent and reward", "python"))
    exe = Path(sys.executable).parent / "searchgym"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    commands = readme_block("Your own env, agent and reward", "bash").replace("\\\n", " ").splitlines()
    evaluate, train = (shlex.split(c) for c in commands)
    result = subprocess.run([str(exe), *evaluate[1:], "--no-progress"], cwd=tmp_path, capture_output=True,
                            text=True, env=env, timeout=600)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    [row] = [
        line.split() for line in result.stdout.splitlines() if line.split()[:2] == ["mylab:YearAgent", "all"]
    ]
    assert float(row[3]) == 1.0  # EM: the agent's search finds every year
    train += ["--set", f"model={tiny_llama_dir}", "--set", "max_new_tokens=16", "--no-progress"]
    result = subprocess.run([str(exe), *train[1:]], cwd=tmp_path, capture_output=True, text=True, env=env,
                            timeout=900)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert "after GRPO" in result.stdout
    metrics = [json.loads(line) for line in (tmp_path / "runs" / "mylab" / "metrics.jsonl").open()]
    assert any("reward/short_answer" in row for row in metrics)  # the user's term, logged as a component
