"""Failure kinds and the retrieval card: episodes of each kind built by hand, and the kinds of
real episodes adding up to their errors."""

import pytest

import searchgym
from searchgym.agents import HeuristicAgent, OracleAgent, run_episodes
from searchgym.agents.play.episode import Episode, Turn
from searchgym.agents.play.failures import (
    KINDS,
    against_oracle,
    decisions,
    failure_card,
    failure_kind,
    format_card,
)

CHAIN = [
    {"entity": "Gremis Deilwell", "relation": "alma_mater", "doc_id": "d1",
     "query": "Gremis Deilwell studied"},
    {"entity": "Asora Institute of Technology", "relation": "founding_year", "doc_id": "d2",
     "query": "Asora Institute of Technology founded"},
]  # fmt: skip


def search(query, *doc_ids):
    return Turn(f"<search> {query} </search>", "...", 0.0, "search", None, query=query, doc_ids=list(doc_ids))


def episode(*turns, answer="1482", chain=CHAIN, evidence=("d1", "d2"), **fields):
    answered = answer is not None
    turns = (
        [*turns, Turn(f"<answer> {answer} </answer>", "", 0.0, "answer", None)] if answered else list(turns)
    )
    return Episode(
        "t", "q?", ["1482"], {"chain": chain} if chain else {}, turns, prediction=answer,
        em=float(answer == "1482"), evidence=list(evidence), **fields,
    )  # fmt: skip


GOOD_HOP = search("Gremis Deilwell studied", "d1", "d7")
BY_KIND = {
    None: episode(GOOD_HOP, search("Asora Institute of Technology founded", "d2")),
    "program_error": episode(GOOD_HOP, answer=None, error="the program raised ValueError: boom"),
    "turn_limit": episode(GOOD_HOP, search("Asora Institute founding", "d5"), answer=None, truncated=True),
    "protocol": episode(
        Turn("<serch> x", "invalid", 0.0, None, "no tag"), answer=None, n_invalid=1, truncated=True
    ),
    "reading_miss": episode(GOOD_HOP, search("Asora Institute of Technology founded", "d2"), answer="1500"),
    "early_answer": episode(GOOD_HOP, answer="1500"),  # answered after one search of two hops
    "wrong_entity": episode(GOOD_HOP, search("Orvan College founded", "d9"), answer="1500"),
    "wrong_relation": episode(
        GOOD_HOP, search("Asora Institute of Technology location", "d8"), answer="1500"
    ),
    "retrieval_miss": episode(GOOD_HOP, search("Asora Institute of Technology founded", "d8"), answer="1500"),
    "unknown": episode(GOOD_HOP, answer="1500", chain=None, evidence=()),
}


@pytest.mark.parametrize("kind", list(BY_KIND))
def test_each_kind_from_a_hand_made_episode(kind):
    assert failure_kind(BY_KIND[kind]) == kind


def test_a_missed_first_hop_is_judged_first_and_evidence_without_a_chain_is_a_retrieval_miss():
    # the first hop's passage never showed: its entity was searched with another relation's words
    first = episode(search("Gremis Deilwell born", "d4"),
                    search("Asora Institute of Technology founded", "d2"), answer="1500")  # fmt: skip
    assert failure_kind(first) == "wrong_relation"
    assert failure_kind(episode(GOOD_HOP, answer="1500", chain=None)) == "retrieval_miss"


def test_the_card_counts_every_kind_with_its_interval_and_what_the_searches_showed():
    episodes = list(BY_KIND.values())
    card = failure_card(episodes)
    assert card["n"] == 10 and card["failed"] == 9 == sum(k["count"] for k in card["kinds"].values())
    assert list(card["kinds"]) == [k for k in KINDS if k in BY_KIND]  # in the order they are decided
    assert all(v["low"] <= v["count"] <= v["high"] for v in card["kinds"].values())
    # 9 episodes name their evidence: the gold passages shown, turn by turn
    assert card["with_evidence"] == 9
    assert card["gold_shown"] == pytest.approx(10 / 18)  # d1 in 8 of them, d2 in 2
    assert card["all_gold_shown"] == pytest.approx(2 / 9)
    assert card["first_gold_turn"] == 0.0
    line = format_card("me", card)
    assert line.startswith("me: 9 of 10 failed: program_error 1 [") and "gold passages shown 56%" in line


def test_the_heuristics_failures_add_up_to_its_errors_on_the_generated_world():
    env = searchgym.make("searchgym/FictionalQA-BM25-v0", n_passages=300, hops=[2])
    tasks = list(env.unwrapped.tasks[:20])
    episodes = run_episodes(lambda: env, HeuristicAgent, tasks)
    card = failure_card(episodes)
    assert (
        card["failed"] == sum(ep.em < 1 for ep in episodes) == sum(v["count"] for v in card["kinds"].values())
    )
    assert card["failed"] > 0 and "unknown" not in card["kinds"]  # every task has its chain
    env.close()


def test_the_card_compares_the_agents_searches_with_the_oracles_queries():
    env = searchgym.make("searchgym/FictionalQA-BM25-v0", n_passages=300, hops=[2], top_k=1)
    tasks = list(env.unwrapped.tasks[:10])
    mine = run_episodes(lambda: env, HeuristicAgent, tasks)
    oracle = run_episodes(lambda: env, OracleAgent, tasks)
    found = against_oracle(mine, oracle)
    agent_share = failure_card(mine)["gold_shown"]
    assert 0 < found["oracle_gold_shown"] <= 1
    assert found["recall_vs_oracle"] == pytest.approx(agent_share / found["oracle_gold_shown"])
    assert against_oracle(oracle, oracle)["recall_vs_oracle"] == 1.0


def test_adasearchs_decisions_count_where_the_agent_skipped_searching_and_where_it_knew():
    def ep(searches, em):
        turns = [Turn("", "", 0.0, "search", None) for _ in range(searches)]
        return Episode("t", "q", ["a"], {}, turns, prediction="a", em=em, n_searches=searches)

    open_book = [ep(0, 1.0), ep(0, 0.0), ep(1, 1.0), ep(2, 0.0)]
    closed_book = [ep(0, 1.0), ep(0, 0.0), ep(0, 1.0), ep(0, 0.0)]
    got = decisions(open_book, closed_book)
    assert (got["knew"], got["no_search"], got["no_search_right"], got["searched_though_knew"]) == (
        2,
        2,
        1,
        1,
    )
    assert (got["precision"], got["recall"], got["f1_aware"]) == (0.5, 0.5, 0.5)
    assert decisions(open_book, [ep(0, 0.0)] * 4)["f1_aware"] is None  # knew nothing: undefined
    card = failure_card(open_book) | {"decisions": got}
    assert "searched though it knew 1; AdaSearch F1-aware 0.500" in format_card("me", card)
