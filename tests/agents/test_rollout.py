import warnings

import pytest

from searchgym.agents import (
    Agent,
    HeuristicAgent,
    OracleAgent,
    RandomAgent,
    load_episodes,
    make_agent,
    run_episodes,
    save_episodes,
    summarize,
    summarize_by,
)
from searchgym.envs import SearchEnv, TurnLimit
from searchgym.errors import ConfigError
from searchgym.retrievers import BM25
from searchgym.tasks import Task

TASKS = [
    Task("t1", "What is the capital of France?", ("Paris",), ("d1",), {"hops": 1}),
    Task("t2", "In what year was Marie Curie born?", ("1867",), ("d6",), {"hops": 1}),
    Task(
        "t3",
        "What river flows through the capital of Poland?",
        ("Vistula",),
        ("d7",),
        {"hops": 2, "chain": [{"query": "capital of Poland"}, {"query": "Warsaw river"}]},
    ),
    Task("t4", "Which lake is Zürich on?", ("Lake Zürich",), ("d5",), {"hops": 1}),
]


@pytest.fixture(scope="module")
def make_env(tiny_corpus_path):
    bm25 = BM25.from_corpus(tiny_corpus_path)
    return lambda protocol="tags": TurnLimit(SearchEnv(TASKS, bm25, protocol=protocol), 4)


@pytest.mark.parametrize("protocol", ["tags", "tool_calls"])
def test_oracle_follows_the_chain_and_answers(make_env, protocol):
    episodes = run_episodes(lambda: make_env(protocol), OracleAgent, TASKS)
    assert [ep.em for ep in episodes] == [1.0] * 4
    assert [ep.n_searches for ep in episodes] == [1, 1, 2, 1]
    assert episodes[2].turns[0].action.endswith("<search> capital of Poland </search>") or protocol != "tags"
    assert all(ep.n_invalid == 0 and ep.terminated and not ep.truncated for ep in episodes)


def test_the_oracle_says_what_it_does_where_a_task_has_no_evidence_chain(make_env):
    env = make_env()
    _, info = env.reset(options={"task": TASKS[0]})  # no chain: the oracle searches the question
    with pytest.warns(UserWarning, match=r"without an evidence chain .* EM is 1 by construction"):
        OracleAgent().reset(info)
    _, info = env.reset(options={"task": TASKS[2]})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        OracleAgent().reset(info)  # a chain to follow: nothing to say


def test_wasteful_oracle_searches_the_question_once_more_in_its_share_of_episodes(make_env):
    always = run_episodes(make_env, lambda: OracleAgent(p_verify=1.0), TASKS)
    assert [ep.em for ep in always] == [1.0] * 4
    assert [ep.n_searches for ep in always] == [2, 2, 3, 2]
    assert always[2].turns[2].action.endswith(f"<search> {TASKS[2].question} </search>")
    tasks = TASKS * 25
    most = run_episodes(make_env, lambda: make_agent("wasteful-oracle", seed=3), tasks)
    extra = [ep.n_searches - len(t.metadata.get("chain", [None])) for ep, t in zip(most, tasks)]
    assert set(extra) == {0, 1} and 65 <= sum(extra) <= 95  # p_verify 0.8
    assert all(ep.em == 1.0 for ep in most)


@pytest.mark.parametrize("protocol", ["tags", "tool_calls"])
def test_the_terse_oracle_plays_the_oracles_calls_without_its_thoughts(make_env, protocol):
    """`terse-oracle` (a warm start with a third of the tokens to decode): the same calls, the same
    scores, and no ``<think>`` block in any action."""
    terse = run_episodes(lambda: make_env(protocol), lambda: make_agent("terse-oracle"), TASKS)
    full = run_episodes(lambda: make_env(protocol), OracleAgent, TASKS)
    assert [[t.query for t in ep.turns] for ep in terse] == [[t.query for t in ep.turns] for ep in full]
    assert [(ep.em, ep.n_invalid, ep.terminated) for ep in terse] == [(1.0, 0, True)] * 4
    assert all("<think>" in t.action for ep in full for t in ep.turns)
    assert not any("<think>" in t.action for ep in terse for t in ep.turns)
    if protocol == "tags":
        assert terse[2].turns[0].action == "<search> capital of Poland </search>"


def test_heuristic_answers_from_the_top_document(make_env):
    episodes = run_episodes(make_env, HeuristicAgent, TASKS)
    assert [ep.n_searches for ep in episodes] == [1, 1, 1, 1]
    assert episodes[1].prediction == "1867" and episodes[1].em == 1.0
    assert all(ep.n_turns == 2 and ep.n_invalid == 0 for ep in episodes)


def test_random_agent_is_seeded(make_env):
    a = run_episodes(make_env, lambda: RandomAgent(seed=1), TASKS)
    b = run_episodes(make_env, lambda: RandomAgent(seed=1), TASKS)
    assert [ep.to_dict() for ep in a] == [ep.to_dict() for ep in b]
    assert all(isinstance(make_agent(n), Agent) for n in ("oracle", "heuristic", "random"))


def test_parallel_envs_give_the_same_episodes_in_task_order(make_env):
    one = run_episodes(make_env, OracleAgent, TASKS, n_envs=1)
    three = run_episodes(make_env, OracleAgent, TASKS, n_envs=3)
    assert [ep.task_id for ep in three] == ["t1", "t2", "t3", "t4"]
    assert [ep.to_dict() for ep in one] == [ep.to_dict() for ep in three]


def test_truncated_episode_scores_zero(make_env):
    class Searcher:
        def reset(self, info):
            pass

        def act(self, observation):
            return "<search>capital</search>"

    (ep,) = run_episodes(make_env, Searcher, TASKS[:1])
    assert ep.truncated and not ep.terminated and ep.n_turns == 4
    assert ep.prediction is None and ep.em == 0.0 and ep.n_searches == 4


def test_save_and_load_roundtrip(make_env, tmp_path):
    episodes = run_episodes(make_env, OracleAgent, TASKS)
    save_episodes(episodes, tmp_path / "ep.jsonl")
    assert load_episodes(tmp_path / "ep.jsonl") == episodes


def test_summaries(make_env):
    episodes = run_episodes(make_env, OracleAgent, TASKS)
    s = summarize(episodes)
    assert s["n"] == 4 and s["em"] == 1.0 and s["searches"] == 1.25 and s["turns"] == 2.25
    by = summarize_by(episodes, "hops")
    assert list(by) == [1, 2] and by[1]["n"] == 3 and by[2]["searches"] == 2.0
    with pytest.raises(ValueError):
        summarize([])


def test_unknown_agent_suggests():
    with pytest.raises(ConfigError, match="Did you mean 'oracle'"):
        make_agent("oracel")
