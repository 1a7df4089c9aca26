"""Search Self-play as a task source: the verified questions of a proposer, scored by a solver's
pass rate, become a task set that an oracle answers with EM 1.0."""

from __future__ import annotations

import json

import pytest

from searchgym.agents import make_agent
from searchgym.agents.play.self_play import judge, proposer_reward, self_play, write_questions
from searchgym.cli import main
from searchgym.tasks import load as load_task_set


def test_verified_questions_score_the_proposer_by_the_solvers_pass_rate(tmp_path):
    proposals, solved = self_play(
        lambda: make_agent("oracle"), lambda: make_agent("heuristic"), n=12, solver_episodes=2,
        env_kwargs={"hops": 1}, seed=1,
    )  # fmt: skip
    assert len(proposals) == 12 and all(p.verdict.verified for p in proposals)
    assert len(solved) == 24
    for i, p in enumerate(proposals):
        runs = solved[2 * i : 2 * i + 2]
        assert [ep.task_id for ep in runs] == [p.verdict.task.id] * 2
        assert p.pass_rate == sum(ep.em for ep in runs) / 2 and p.reward == 1 - p.pass_rate
    assert 0 < sum(p.pass_rate for p in proposals) < 12  # the heuristic answers some, not all
    tasks = load_task_set(str(write_questions(proposals, tmp_path / "q.jsonl")), split="dev")
    assert [t.id for t in tasks] == [p.verdict.task.id for p in proposals]
    assert tasks[0].metadata["chain"] and tasks[0].metadata["proposer_reward"] == proposals[0].reward


def test_an_unverified_proposal_earns_nothing_and_is_not_a_question():
    proposals, solved = self_play(
        lambda: make_agent("heuristic"), lambda: make_agent("oracle"), n=3, env_kwargs={"hops": 1}
    )
    assert [p.verdict.verdict for p in proposals] == ["not a question of the world"] * 3
    assert [p.reward for p in proposals] == [0.0] * 3 and solved == []
    assert proposer_reward(0.5, "intermediate") == 1.0 and proposer_reward(1.0) == 0.0


def test_a_saved_proposal_is_judged_again_the_same_way():
    proposals, _ = self_play(
        lambda: make_agent("oracle"), lambda: make_agent("oracle"), n=2, solver_episodes=1
    )
    from searchgym.tasks.world import load_world

    for p in proposals:
        assert judge(load_world(), p.episode) == p.verdict


def test_the_command_writes_questions_an_oracle_answers_exactly(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = ["self-play", "--n", "20", "-E", "hops=2", "-S", "max_turns=4", "--out", "sp", "--no-progress"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "20 of 20 proposals verified (oracle proposing, heuristic solving)" in out
    rows = [json.loads(line) for line in (tmp_path / "sp" / "proposals.jsonl").read_text().splitlines()]
    assert len(rows) == 20 and {r["verdict"] for r in rows} == {"verified"}
    assert main(["eval", "--agent", "oracle", "-E", "task_set=sp/questions.jsonl", "--json", "--no-progress",
                 "--out", "ev"]) == 0  # fmt: skip
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert report["agents"]["oracle"]["all"]["em"] == pytest.approx(1.0) and report["n"] == 20
