"""`searchgym rescore`: a run's saved episodes replayed under a rubric, without a model. Under the
run's own rubric it gives back exactly what training logged; under another, the values the terms'
definitions give."""

import json

import pytest
from train_config import tiny_config

from searchgym.agents.train.grpo import train
from searchgym.agents.train.metrics_log import read_metrics
from searchgym.agents.train.rescore import read_saved, rescore
from searchgym.cli import main
from searchgym.errors import ConfigError


@pytest.fixture(scope="module")
def run_dir(tiny_llama_dir, tmp_path_factory):
    """Two steps of 2 tasks x 2 episodes, every episode saved, information gain weighed."""
    run_dir = tmp_path_factory.mktemp("run")
    cfg = tiny_config(tiny_llama_dir, run_dir, log_episodes=4, eval_tasks=0, max_turns=3)
    train(cfg)
    return run_dir


def test_under_the_runs_own_rubric_it_gives_back_what_training_logged(run_dir, tmp_path, capsys):
    assert main(["rescore", str(run_dir), "--out", str(tmp_path), "--no-progress"]) == 0
    report = json.loads((tmp_path / "rescore.json").read_text())
    logged = {row["step"]: row for row in read_metrics(run_dir) if "reward/total" in row}
    for step in report["steps"]:
        assert step["reward_new"] == step["reward_old"] == step["reward_logged"]  # exactly
        assert step["complete_groups"] == 2 and step["pairs_flipped"] == 0.0
        assert step["terms_new"]["info_gain"] == logged[step["step"]]["reward/info_gain"]
        for g in step["groups"]:
            assert g["advantage_new"] == g["advantage_old"]
    for step in (1, 2):
        old = [s.episode for s in read_saved(run_dir) if s.step == step]
        new = [s.episode for s in read_saved(tmp_path) if s.step == step]
        assert [e.total_reward for e in new] == [e.total_reward for e in old]
        assert [e.reward_components for e in new] == [e.reward_components for e in old]
    printed = capsys.readouterr()
    assert "step  episodes" in printed.out and "rescore" not in printed.err  # --no-progress: no bar


def test_under_another_rubric_each_term_is_what_its_definition_gives(run_dir, tmp_path, capsys):
    overrides = [
        "rewards={format: 0.5, per_search: 0.1, terms: {evidence_recall: 2.0, info_gain: 0.0}}",
    ]
    report = rescore(run_dir, overrides, tmp_path)
    assert "rescore: 100%" in capsys.readouterr().err  # a bar over the episodes replayed
    for step in (1, 2):
        old = [s.episode for s in read_saved(run_dir) if s.step == step]
        new = [s.episode for s in read_saved(tmp_path) if s.step == step]
        for before, after in zip(old, new):
            c = after.reward_components
            if after.prediction is not None:
                assert c["evidence_recall"] == after.evidence_recall
            expected = c["outcome"] + 0.5 * c["format"] - 0.1 * c["search_calls"] + 2.0 * c["evidence_recall"]
            assert after.total_reward == pytest.approx(expected)
            assert c["search_calls"] == before.reward_components["search_calls"] == after.n_searches
            assert "info_gain" not in c  # weighed 0: left out
    by_term = report["steps"][0]["groups"][0]["by_term"]
    assert set(by_term) == {"outcome", "format", "search_calls", "evidence_recall"}


def test_what_it_cannot_rescore_it_says_before_replaying(run_dir, tmp_path, monkeypatch):
    import searchgym
    from searchgym.registry import TRAINER_REWARDS

    monkeypatch.setattr(TRAINER_REWARDS, "_specs", dict(TRAINER_REWARDS._specs))
    searchgym.register_reward(
        "test_rescore_gain", lambda episodes, scorer: [[]] * len(episodes), level="trainer"
    )
    with pytest.raises(ConfigError, match="test_rescore_gain is a trainer term, which reads the policy"):
        rescore(run_dir, ["rewards.terms.test_rescore_gain=1.0"], tmp_path)
    with pytest.raises(ConfigError, match="changes rewards and advantage only, not max_turns"):
        rescore(run_dir, ["max_turns=5"], tmp_path)
    with pytest.raises(ConfigError, match="unknown reward function 'no_such_term'"):
        rescore(run_dir, ["rewards.terms.no_such_term=1.0"], tmp_path)
    assert not (tmp_path / "rescore.json").exists()
