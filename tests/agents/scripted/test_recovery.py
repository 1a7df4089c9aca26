"""The recovering oracle: some episodes search one hop wrongly, and the next search is that hop's
gold query; every episode still answers right; a warm start leaves the wrong search out of the
loss."""

import pytest
from transformers import AutoTokenizer

import searchgym
from searchgym.agents import make_agent, run_episodes
from searchgym.agents.train.warm_start import scripted_episodes

WORLD = {"n_passages": 300, "seed": 0, "hops": [2, 3], "top_k": 2, "split": "train"}


def make_env():
    return searchgym.make("searchgym/FictionalQA-BM25-v0", **WORLD)


@pytest.fixture(scope="module")
def tasks():
    return list(make_env().unwrapped.tasks)[:40]


def detours(episode):
    """The searches outside the gold chain, each with the search after it."""
    chain = episode.metadata["chain"]
    queries = [turn.query for turn in episode.turns if turn.query is not None]
    gold = [hop["query"] for hop in chain]
    return [(i, q) for i, q in enumerate(queries) if q not in gold], queries, gold


def test_a_wrong_search_misses_its_hop_and_the_next_search_recovers(tasks):
    episodes = run_episodes(make_env, lambda: make_agent("recovering-oracle", seed=1), tasks)
    assert all(ep.em == 1.0 and ep.n_invalid == 0 for ep in episodes)
    wrong = 0
    for ep in episodes:
        found, queries, gold = detours(ep)
        assert len(found) <= 1
        if not found:
            assert queries == gold
            continue
        [(i, query)] = found
        hop = ep.metadata["chain"][i]
        searches = [turn for turn in ep.turns if turn.query is not None]
        if len(queries) == len(gold):  # a detour that showed its hop's passage: the chain goes on
            assert queries[:i] + queries[i + 1 :] == gold[:i] + gold[i + 1 :]
            assert hop["doc_id"] in searches[i].doc_ids
            continue
        wrong += 1
        assert queries[:i] + queries[i + 1 :] == gold  # the chain, with the detour before its hop
        assert hop["doc_id"] not in searches[i].doc_ids  # it missed the hop's passage
        assert "These results " in ep.turns[i + 1].action  # and says so as it recovers
    assert 0.15 * len(episodes) <= wrong <= 0.6 * len(episodes)


def test_the_warm_start_trains_on_the_recovery_not_on_the_mistake(tiny_llama_dir, tasks):
    tokenizer = AutoTokenizer.from_pretrained(tiny_llama_dir)
    episodes = scripted_episodes([make_env], tasks[:20], tokenizer, agent="recovering-oracle", seed=1)
    checked = 0
    for ep in episodes:
        found, _, _ = detours(ep)
        traj = ep.trajectory
        spans = list(zip(traj.turn_starts, traj.turn_ends))
        for t, (start, end) in enumerate(spans):
            trained = set(traj.mask[start:end])
            assert trained == ({0} if found and t == found[0][0] else {1})
        checked += bool(found)
    assert checked
