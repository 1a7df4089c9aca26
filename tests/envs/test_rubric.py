"""Episode reward terms: a user's function, named in the reward weights, scored once at the end of
the episode (answered or truncated), weighted into the reward and logged as its own component."""

import pytest

import searchgym
from searchgym.agents import OracleAgent, run_episodes
from searchgym.envs.rubric import EpisodeRecord, evidence_recall
from searchgym.errors import ConfigError
from searchgym.registry import REWARDS

SMALL_WORLD = {"n_passages": 300}
SEEN: list[EpisodeRecord] = []


def make(terms, **kwargs):
    return searchgym.make("searchgym/FictionalQA-BM25-v0", rewards={"terms": terms}, **kwargs, **SMALL_WORLD)


def answer_length(episode: EpisodeRecord) -> float:
    SEEN.append(episode)
    return float(len(episode.prediction or ""))


def test_a_term_named_module_attr_is_weighted_into_the_last_reward_and_logged():
    plain = searchgym.make("searchgym/FictionalQA-BM25-v0", **SMALL_WORLD)
    scored = make({"test_rubric:answer_length": 0.5})
    tasks = list(plain.unwrapped.tasks[:3])
    a = run_episodes(lambda: plain, OracleAgent, tasks)
    b = run_episodes(lambda: scored, OracleAgent, tasks)
    for before, after in zip(a, b):
        length = float(len(after.prediction))
        assert after.reward_components["test_rubric:answer_length"] == length
        assert after.total_reward == pytest.approx(before.total_reward + 0.5 * length)
        assert after.turns[-1].reward == pytest.approx(before.turns[-1].reward + 0.5 * length)
        assert [t.reward for t in after.turns[:-1]] == [
            t.reward for t in before.turns[:-1]
        ]  # only at the end
    assert SEEN[-1].task.id == tasks[-1].id and SEEN[-1].n_searches == b[-1].n_searches


def test_a_truncated_episode_is_scored_too():
    searchgym.register_reward("test-terms-searched", lambda episode: float(episode.truncated))
    env = searchgym.make(
        "searchgym/FictionalQA-BM25-v0",
        max_turns=2,
        rewards={"terms": {"test-terms-searched": 1.0}},
        **SMALL_WORLD,
    )
    env.reset(seed=0)
    assert env.step("<search> a </search>")[1] == 0.0
    _, reward, terminated, truncated, info = env.step("<search> b </search>")
    assert truncated and not terminated and reward == 1.0
    assert info["reward_components"]["test-terms-searched"] == 1.0


def test_built_in_evidence_recall_reads_the_retrieved_ids():
    assert "evidence_recall" in searchgym.list_rewards()
    env = searchgym.make(
        "searchgym/FictionalQA-BM25-v0", rewards={"terms": {"evidence_recall": 1.0}}, **SMALL_WORLD
    )
    [episode] = run_episodes(lambda: env, OracleAgent, list(env.unwrapped.tasks[:1]))
    assert episode.reward_components["evidence_recall"] == episode.evidence_recall == 1.0


def test_bad_terms_fail_when_the_env_is_made():
    with pytest.raises(
        ConfigError, match="unknown reward function 'evidence_recal'. Did you mean 'evidence_recall'"
    ):
        searchgym.make(
            "searchgym/FictionalQA-BM25-v0", rewards={"terms": {"evidence_recal": 1.0}}, **SMALL_WORLD
        )
    with pytest.raises(ConfigError, match="weight of reward term 'evidence_recall' must be a number"):
        searchgym.make(
            "searchgym/FictionalQA-BM25-v0", rewards={"terms": {"evidence_recall": "x"}}, **SMALL_WORLD
        )
    with pytest.raises(ConfigError, match="cannot import 'no_such_module'"):
        searchgym.make(
            "searchgym/FictionalQA-BM25-v0", rewards={"terms": {"no_such_module:f": 1}}, **SMALL_WORLD
        )
    assert "evidence_recall" in REWARDS and evidence_recall.__doc__
