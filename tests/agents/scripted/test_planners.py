"""Scripted planners on the planner env: fixed plans of k gold hops, the question once, no search;
and the scripted agents, which finish where they would answer."""

import pytest

import searchgym
from searchgym.agents import (
    HeuristicAgent,
    OracleAgent,
    RandomAgent,
    make_agent,
    run_episodes,
    summarize,
)
from searchgym.agents.scripted.planners import FixedPlanner, NoSearchPlanner, QuestionPlanner

ENV_ID = "searchgym/FictionalQA-Planner-v0"
SMALL_WORLD = {"n_passages": 300}


@pytest.fixture(scope="module")
def tasks():
    """Ten dev tasks of each hop count."""
    env = searchgym.make(ENV_ID, **SMALL_WORLD)
    by_hops = [[t for t in env.unwrapped.tasks if t.metadata["hops"] == h][:10] for h in (1, 2, 3, 4)]
    return [t for group in by_hops for t in group]


def play(make, tasks):
    return run_episodes(lambda: searchgym.make(ENV_ID, **SMALL_WORLD), make, tasks, n_envs=4)


def test_fixed_planner_searches_the_first_k_hops_then_finishes(tasks):
    env = searchgym.make(ENV_ID, **SMALL_WORLD)
    task = next(t for t in tasks if t.metadata["hops"] == 3)
    planner = FixedPlanner(2)
    obs, info = env.reset(options={"task": task})
    planner.reset(info)
    actions = []
    while True:
        action = planner.act(obs)
        actions.append(action)
        obs, _, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            break
    chain = task.metadata["chain"]
    assert [a.split("<search> ")[1].split(" </search>")[0] for a in actions[:2]] == [
        chain[0]["query"],
        chain[1]["query"],
    ]
    assert actions[2].endswith("<finish></finish>") and terminated and info["n_searches"] == 2


def test_more_hops_cost_more_and_answer_more(tasks):
    metrics = {k: summarize(play(lambda k=k: FixedPlanner(k), tasks)) for k in range(5)}
    hops = [t.metadata["hops"] for t in tasks]
    for k, m in metrics.items():
        assert m["searches"] == pytest.approx(sum(min(k, h) for h in hops) / len(hops))
        assert m["invalid_rate"] == 0.0 and m["truncated"] == 0.0
    assert metrics[0]["em"] == 0.0  # the reader has nothing to read
    assert metrics[1]["em"] < metrics[2]["em"] < metrics[4]["em"]
    oracle = summarize(play(OracleAgent, tasks))
    assert (oracle["em"], oracle["searches"]) == (metrics[4]["em"], metrics[4]["searches"])


def test_question_and_no_search_planners(tasks):
    question = play(QuestionPlanner, tasks[:6])
    assert all(
        ep.n_searches == 1 and ep.turns[0].action.endswith(f"<search> {ep.question} </search>")
        for ep in question
    )
    none = play(NoSearchPlanner, tasks[:6])
    assert all(ep.n_turns == 1 and ep.prediction == "unknown" for ep in none)


@pytest.mark.parametrize("agent", [HeuristicAgent, lambda: RandomAgent(seed=1, p_answer=1.0)])
def test_scripted_agents_finish_where_they_would_answer(tasks, agent):
    episodes = play(agent, tasks[:8])
    assert all(ep.terminated and ep.turns[-1].tool == "finish" for ep in episodes)
    assert summarize(episodes)["invalid_rate"] == 0.0


def test_planners_are_registered_by_name():
    assert {"planner-0", "planner-4", "planner-question"} <= set(searchgym.list_agents())
    planner = make_agent("planner-3")
    assert isinstance(planner, FixedPlanner) and planner.k == 3
    assert isinstance(make_agent("planner-question"), QuestionPlanner)
    with pytest.raises(ValueError, match="must be >= 0"):
        FixedPlanner(-1)


def test_on_an_env_with_an_answer_tool_planners_answer_unknown():
    env = searchgym.make("searchgym/FictionalQA-BM25-v0", **SMALL_WORLD)
    (episode,) = run_episodes(lambda: env, lambda: FixedPlanner(1), env.unwrapped.tasks[:1])
    assert episode.turns[-1].tool == "answer" and episode.prediction == "unknown"
