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
    assert tests.rsplit(" && ", 2)[0] == setup  # then the side venvs, then pytest
    assert tests.split(" && ")[-2] == "bash .ci/side-venvs"
    assert "torch==2.13.0" in setup  # never an unpinned torch: it would pull CUDA on a CPU machine
    ci = (ROOT / ".ci" / "run").read_text()
    install = setup.split(" && ")[-1].replace("pip install", "pip install --quiet")
    assert install in ci
    assert tests.rsplit(" && ", 1)[1] in ci and "\nbash .ci/side-venvs\n" in ci


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
    assert not [x for x in lines if "as loaded" in x]
    for when in ("after SFT", "after GRPO"):  # warm-started, then trained (eval_base: false)
        [line] = [x for x in lines if x.startswith("dev") and when in x]
        em = float(line.split("EM")[1].split()[0])
        assert 0 <= em <= 1
    plots = {p.name for p in (tmp_path / "run" / "plots").iterdir()}
    assert {"reward.png", "loss.png", "rollout.png", "eval.png"} <= plots
    assert (tmp_path / "run" / "checkpoints" / "step-000001" / "model.safetensors").is_file()
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    [step] = [row for row in rows if "reward/total" in row]
    assert {"reward/outcome", "reward/info_gain"} <= set(step)  # the rewards the config's comments explain


def test_usage_example_runs_and_prints_what_the_readme_says(capsys):
    block = readme_block("Use it", "python")
    namespace: dict = {}
    exec(compile(block, "README.md", "exec"), namespace)
    info = namespace["info"]
    assert namespace["terminated"] and info["n_searches"] == 2 and info["em"] == 1.0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines[1:4]] == ["search", "search", "answer"]
    assert lines[-1] == block.split("# ")[-1].strip()  # the output the block's last comment shows


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


def test_your_own_env_stops_an_agent_that_never_answers():
    """The custom env of the README, as written, under an agent that only ever searches: every
    episode ends, truncated at the default 8 turns (an env without a turn limit would hang)."""
    import gymnasium as gym

    from searchgym.agents import run_episodes
    from searchgym.registry import REWARDS

    class NeverAnswers:
        def reset(self, info):
            pass

        def act(self, observation):
            return "<search> one more search </search>"

    exec(compile(readme_block("Your own env, agent and reward", "python"), "README.md", "exec"), {})
    try:
        env = gym.make("mylab/History-v0")
        episodes = run_episodes(lambda: gym.make("mylab/History-v0"), NeverAnswers, env.unwrapped.tasks)
        outcomes = [(ep.truncated, ep.n_turns, ep.prediction) for ep in episodes]
        assert outcomes == [(True, 8, None)] * 2  # the dev split
    finally:
        del gym.registry["mylab/History-v0"]
        del REWARDS._specs["short_answer"]
