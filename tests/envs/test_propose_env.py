"""Search Self-play's proposer env: each verdict of `verify_proposal` on proposals built by hand,
and an episode's outcome and info."""

from __future__ import annotations

import pytest

import searchgym
from searchgym.agents import make_agent, run_episodes
from searchgym.envs.self_play import VERDICTS, verify_proposal
from searchgym.tasks.world import load_world

ENV = "searchgym/FictionalQA-Propose-v0"


@pytest.fixture(scope="module")
def world():
    return load_world(seed=0, n_passages=2000)


def test_each_verdict(world):
    task = world.tasks("train", hops=2)[0]
    every_hop = set(task.evidence)

    def verdict(question, target=task.answers, shown=every_hop):
        return verify_proposal(world, question, target, shown, "q").verdict

    good = verify_proposal(world, task.question, task.answers[-1:], every_hop, "q")
    assert good.verified and good.task.answers == task.answers and good.task.evidence == task.evidence
    assert good.task.metadata["chain"] == task.metadata["chain"]
    assert verdict("Who won the 1998 chess open?") == "not a question of the world"
    assert verdict(task.question, target=("Somebody Else",)) == "another answer"
    assert verdict(task.question, shown=every_hop - {task.evidence[1]}) == "evidence not found"
    person = next(e for e in world.entities if e["kind"] == "person" and "spouse" in e["facts"])
    loop = f"Who is the spouse of the spouse of {person['name']}?"  # leads back to the person
    assert verdict(loop, target=(person["name"],), shown=set()) == "answer in question"


def test_two_entities_of_one_name_make_a_question_ambiguous(world):
    """A world whose table has a second organisation of the same name (and another founder)."""
    org = next(e for e in world.entities if e["kind"] == "organisation" and "founder" in e["facts"])
    other = next(e for e in world.entities if e["kind"] == "person" and e["id"] != org["facts"]["founder"])
    twin = {**org, "id": "twin", "facts": {**org["facts"], "founder": other["id"]}}
    doubled = type("World", (), {"entities": (*world.entities, twin)})()
    assert verify_proposal(doubled, f"Who founded {org['name']}?", ("x",), set(), "q").verdict == "ambiguous"
    assert "ambiguous" in VERDICTS


def test_a_proposal_ends_the_episode_with_its_verdict():
    env = searchgym.make(ENV, hops=2)
    task = env.unwrapped.tasks[0]
    env.reset(options={"task": task})
    for hop in task.metadata["chain"]:
        env.step(f"<search> {hop['query']} </search>")
    _, reward, terminated, _, info = env.step(f"<propose> {task.metadata['seed_question']} </propose>")
    assert terminated and reward == 1.0 and info["verdict"] == "verified" and info["em"] == 1.0
    assert info["proposed"]["answers"] == list(task.answers)
    env.reset(options={"task": task})
    _, reward, terminated, _, info = env.step(f"<propose> {task.metadata['seed_question']} </propose>")
    assert terminated and reward == 0.0 and info["verdict"] == "evidence not found"
    assert "searches showed" in info["reason"]


@pytest.mark.parametrize("agent, verified", [("oracle", 1.0), ("heuristic", 0.0), ("random", 0.0)])
def test_every_scripted_agent_plays_the_proposer(agent, verified):
    make = lambda: searchgym.make(ENV, hops=1)  # noqa: E731
    tasks = list(make().unwrapped.tasks[:6])
    episodes = run_episodes(make, lambda: make_agent(agent), tasks)
    assert [ep.em for ep in episodes] == [verified] * 6


def test_an_unknown_option_is_named():
    from searchgym.errors import ConfigError

    with pytest.raises(ConfigError, match=r"unknown env option\(s\) \['topk'\] for the proposer"):
        searchgym.make(ENV, topk=2)
