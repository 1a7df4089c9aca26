"""No silent zeros: an evaluation whose episodes end with an error says so, in an errors column and
a warning line naming the most common error and its fix, in `searchgym eval` and in `train`'s
evaluations; and `eval` says which tasks (split, hop counts) it played."""

import json

import pytest
import yaml

from searchgym.cli import main

FAILING = """
import time


def slow(question, client, tools):
    time.sleep(30)


def broken(question, client, tools):
    raise ValueError("no idea")
"""


@pytest.fixture
def program(tmp_path):
    path = tmp_path / "failing_agent.py"
    path.write_text(FAILING)
    return path


def test_eval_prints_the_errors_of_a_program_that_runs_past_its_time_limit(
    tiny_llama_dir, program, tmp_path, capsys
):
    args = ["eval", "--program", f"{program}:slow", "--agent", f"hf:{tiny_llama_dir}", "--n", "2"]
    args += ["--time-limit", "0.5", "-E", "n_passages=300", "--no-progress", "--out", str(tmp_path)]
    assert main(args) == 0
    out = capsys.readouterr().out
    header, row = out.splitlines()[2:4]
    assert header.split()[-2:] == ["errors", "ev.recall"]
    assert row.split()[:2] == [f"{program}:slow", "all"] and row.split()[-2] == "1.000"
    assert (
        f"{program}:slow: warning: 2 of 2 episodes ended with an error, scored as the env left them; most "
        "common (2): the program ran past its time limit of 0.5 s of its own time" in out
    )
    assert "-> give each episode more time: eval --time-limit SECONDS" in out
    report = json.loads((tmp_path / "metrics.json").read_text())
    assert report["agents"][f"{program}:slow"]["all"]["errors"] == 1.0
    assert "ran past its time limit" in report["warnings"][f"{program}:slow"]


def test_eval_of_scripted_agents_has_no_errors_and_says_which_tasks_it_played(tmp_path, capsys):
    argv = ["eval", "--agent", "oracle", "--n", "6", "-E", "hops=[2,3]", "-E", "split=test", "--no-progress"]
    assert main([*argv, "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[1].startswith("tasks: 6 of the ")
    assert " of fictional/test/2hop+3hop; hops 2 ×" in out
    assert "warning" not in out
    report = json.loads((tmp_path / "metrics.json").read_text())
    assert report["agents"]["oracle"]["all"]["errors"] == 0.0 and report["warnings"] == {}
    assert report["tasks"] == out.splitlines()[1].rsplit("  seed", 1)[0]


def test_train_evaluations_print_the_errors_of_a_program(tiny_llama_dir, program, tmp_path, capsys):
    values = {
        "model": str(tiny_llama_dir),
        "env_kwargs": {"n_passages": 300},
        "steps": 0,
        "eval_tasks": 2,
        "eval_base": False,
        "tensorboard": False,
    }
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump(values))
    run = tmp_path / "run"
    assert main(["train", "--config", str(cfg), "--program", f"{program}:broken", "--run-dir", str(run)]) == 0
    out = capsys.readouterr().out
    assert "errors 1.000  (n 2)" in out
    assert (
        "warning: 2 of 2 episodes ended with an error, scored as the env left them; most common (2): the "
        "program raised ValueError: no idea -> fix the program" in out
    )
