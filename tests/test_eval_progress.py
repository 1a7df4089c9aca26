"""``searchgym eval`` never sits silent: its bar of episodes keeps its clock running between
turns, a simulated search engine's writing shows under it, and --no-progress hides all of it."""

from __future__ import annotations

import importlib
import threading
import time

from searchgym.agents.play.rollout import episode_progress
from searchgym.cli import main

ROLLOUT = importlib.import_module("searchgym.agents.play.rollout")  # the package's `rollout` is a function
SIMULATED = ["--env", "searchgym/FictionalQA-Simulated-v0", "-E", "n_passages=300"]


def test_eval_shows_the_simulator_writing_under_the_episodes(capsys, tmp_path, scripted_backend):
    argv = ["eval", *SIMULATED, "--agent", "oracle", "--simulator", "scripted:docs", "--n", "2"]
    assert main(argv + ["--out", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert "simulator writing documents" in err
    assert "2/2" in err and "turns=" in err


def test_no_progress_hides_every_bar(capsys, tmp_path, scripted_backend):
    argv = ["eval", *SIMULATED, "--agent", "oracle", "--simulator", "scripted:docs", "--n", "2"]
    assert main(argv + ["--out", str(tmp_path), "--no-progress"]) == 0
    assert capsys.readouterr().err == ""


def test_the_episode_bar_is_redrawn_while_a_turn_runs(capsys, monkeypatch):
    """Without an update, the bar is drawn again and again (its clock moves) until it closes."""
    monkeypatch.setattr(ROLLOUT, "REDRAW_SECONDS", 0.01)
    drawn = ""
    with episode_progress(2, "agent"):
        deadline = time.monotonic() + 30  # a bound for a stalled machine, not a timing
        while drawn.count("0/2") < 5 and time.monotonic() < deadline:
            time.sleep(0.02)
            drawn += capsys.readouterr().err
    assert drawn.count("0/2") >= 5
    assert not [t for t in threading.enumerate() if t.name == "searchgym-progress"]  # stopped on exit


def test_a_hidden_episode_bar_starts_no_thread(monkeypatch):
    monkeypatch.setattr(ROLLOUT, "REDRAW_SECONDS", 0.01)
    with episode_progress(2, "agent", disable=True):
        assert not [t for t in threading.enumerate() if t.name == "searchgym-progress"]
