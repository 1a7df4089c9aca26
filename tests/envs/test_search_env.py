import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

from searchgym.envs import RewardWeights, SearchEnv, TurnLimit
from searchgym.envs.observations import CHARS_PER_TOKEN, TRUNCATION_MARK, count_tokens
from searchgym.errors import RetrieverError
from searchgym.retrievers import BM25, Doc
from searchgym.tasks.task import Task

TASKS = [
    Task("t1", "What is the capital of France?", ("Paris",), evidence=("d1",)),
    Task("t2", "Where was Marie Curie born?", ("Warsaw",), evidence=("d6", "d7")),
]


@pytest.fixture(scope="module")
def bm25(tiny_corpus_path):
    return BM25.from_corpus(tiny_corpus_path)


def make_env(bm25, **kwargs):
    return SearchEnv(TASKS, bm25, **kwargs)


def test_passes_gymnasium_env_checker(bm25):
    # no render modes to check; the registry test checks envs made with a spec
    check_env(make_env(bm25), skip_render_check=True)
    check_env(make_env(bm25, protocol="tool_calls"), skip_render_check=True)


def test_search_then_answer(bm25):
    env = make_env(bm25)
    obs, info = env.reset(seed=0, options={"task": TASKS[0]})
    assert "Question: What is the capital of France?" in obs
    assert info["task_id"] == "t1" and info["n_searches"] == 0

    obs, reward, terminated, truncated, info = env.step("<think>x</think><search>capital of France</search>")
    assert obs.startswith("\n\n<information>Doc 1(Title: Paris) Paris is the capital")
    assert obs.rstrip().endswith("</information>")
    assert (reward, terminated, truncated) == (0.0, False, False)
    # Lyon (d2, "France") and Berlin (d3, "capital") tie on equally rare terms: corpus order decides
    assert info["tool"] == "search" and info["doc_ids"] == ["d1", "d7", "d2"]
    assert info["n_searches"] == 1 and info["obs_tokens"] == info["step_obs_tokens"] > 0

    obs, reward, terminated, truncated, info = env.step("<answer> the Paris </answer>")
    assert (obs, reward, terminated, truncated) == ("", 1.0, True, False)
    assert info["prediction"] == "the Paris"
    assert (info["em"], info["f1"], info["cover_em"], info["evidence_recall"]) == (1.0, 1.0, 1.0, 1.0)
    answered = {"outcome": 1.0, "format": 1.0, "search_calls": 0.0, "obs_tokens_1k": 0.0}
    assert info["reward_components"] == answered  # the costs were charged at the search


def test_wrong_answer_and_partial_evidence(bm25):
    env = make_env(bm25, rewards=RewardWeights(outcome_metric="f1"))
    env.reset(options={"task": TASKS[1]})
    env.step("<search>Marie Curie physicist</search>")
    _, reward, terminated, _, info = env.step("<answer>Warsaw, Poland</answer>")
    assert terminated and info["em"] == 0.0 and info["cover_em"] == 1.0
    assert reward == pytest.approx(2 / 3)  # F1 of "warsaw poland" against "warsaw"
    assert info["evidence_recall"] == 0.5  # d6 found, d7 not


def test_invalid_actions_are_observations(bm25):
    env = make_env(bm25)
    env.reset(options={"task": TASKS[0]})
    for bad, reason in [
        ("no tags at all", "no action found"),
        ("<search>unclosed", "not closed"),
        ("<search></search>", "non-empty"),
        ("<search><answer>Paris</answer></search>", "nested"),
        ("x" * 50_000, "limit"),
    ]:
        obs, reward, terminated, truncated, info = env.step(bad)
        assert reason in info["error"] and reason in obs
        assert (reward, terminated, truncated, info["tool"]) == (0.0, False, False, None)
    assert info["n_invalid"] == 5 and info["n_searches"] == 0
    _, reward, _, _, info = env.step("<answer>Paris</answer>")
    assert info["reward_components"]["format"] == 0.0 and reward == 1.0


def test_several_actions_in_one_turn_runs_the_first(bm25):
    env = make_env(bm25, rewards=RewardWeights(format=0.5))
    env.reset(options={"task": TASKS[0]})
    _, _, terminated, _, info = env.step("<search>France</search> then <answer>Paris</answer>")
    assert not terminated and info["tool"] == "search" and info["n_extra_calls"] == 1
    _, reward, _, _, info = env.step("<answer>Paris</answer>")
    assert info["reward_components"]["format"] == 0.0 and reward == 1.0


def test_document_containing_answer_tag_does_not_answer(bm25):
    env = make_env(bm25)
    env.reset(options={"task": TASKS[0]})
    obs, _, terminated, _, info = env.step("<search>tricky page quotes agent</search>")
    assert not terminated and "d8" in info["doc_ids"]
    assert "<answer>Lyon</answer>" not in obs and "&lt;answer&gt;Lyon&lt;/answer&gt;" in obs
    assert obs.count("</information>") == 1


def test_observation_length_is_capped(bm25):
    env = make_env(bm25, max_obs_tokens=12, top_k=5)
    env.reset(options={"task": TASKS[0]})
    obs, _, _, _, info = env.step("<search>city capital river</search>")
    assert "…[truncated]" in obs and info["step_obs_tokens"] <= 12 + 12  # + wrapper tags and mark


class OneLongWord:
    """A retriever whose top document is one word of a million characters."""

    def search(self, query, k=3):
        return [Doc("long", "Long", "x" * 1_000_000), Doc("d1", "Paris", "Paris is the capital.")][:k]


@pytest.mark.parametrize("max_obs_tokens", [12, 512])
def test_a_million_character_word_is_cut_and_counted_by_its_length(max_obs_tokens):
    weights = RewardWeights(per_search=0.1, per_1k_obs_tokens=1.0)
    env = SearchEnv(TASKS, OneLongWord(), max_obs_tokens=max_obs_tokens, rewards=weights)
    env.reset(options={"task": TASKS[0]})
    obs, reward, _, _, info = env.step("<search>long</search>")
    shown = obs.split("<information>")[1].split("</information>")[0]
    assert shown.startswith("Doc 1(Title: Long) xxx") and shown.endswith(TRUNCATION_MARK)
    assert len(shown) <= CHARS_PER_TOKEN * max_obs_tokens + len(TRUNCATION_MARK)
    tokens = info["step_obs_tokens"]
    assert tokens == info["obs_tokens"] == count_tokens(obs) and len(obs) <= CHARS_PER_TOKEN * tokens
    assert tokens <= max_obs_tokens + 12  # + wrapper tags and mark
    assert reward == pytest.approx(-(0.1 + tokens / 1000))


def test_no_results(bm25):
    env = make_env(bm25)
    env.reset(options={"task": TASKS[0]})
    obs, _, _, _, info = env.step("<search>the of and</search>")
    assert "No results found." in obs and info["doc_ids"] == [] and info["n_searches"] == 1


def test_costs(bm25):
    weights = RewardWeights(per_search=0.1, per_1k_obs_tokens=1.0)
    env = make_env(bm25, rewards=weights)
    env.reset(options={"task": TASKS[0]})
    _, r1, _, _, info = env.step("<search>capital of France</search>")
    assert r1 == pytest.approx(-(0.1 + info["step_obs_tokens"] / 1000))
    _, r2, _, _, _ = env.step("<answer>Paris</answer>")
    assert r2 == 1.0

    env = make_env(bm25, rewards=RewardWeights(per_search=0.1, cost_only_if_correct=True))
    for answer, final in (("Paris", 0.8), ("Lyon", 0.0)):
        env.reset(options={"task": TASKS[0]})
        _, r1, _, _, _ = env.step("<search>capital</search>")
        _, r2, _, _, _ = env.step("<search>France</search>")
        _, r3, _, _, info = env.step(f"<answer>{answer}</answer>")
        assert (r1, r2) == (0.0, 0.0) and r3 == pytest.approx(final)


class FailingRetriever:
    def search(self, query, k=3):
        raise RetrieverError("server at 127.0.0.1:9 did not answer in 5s")

    def batch_search(self, queries, k=3):
        return [self.search(q, k) for q in queries]

    def doc(self, doc_id):
        return None

    def close(self):
        pass


class BuggyRetriever(FailingRetriever):
    def search(self, query, k=3):
        raise KeyError("bug")


def test_tool_failure_is_an_observation_not_a_crash():
    env = SearchEnv(TASKS, FailingRetriever())
    env.reset(options={"task": TASKS[0]})
    obs, reward, terminated, _, info = env.step("<search>capital</search>")
    assert "Search failed" in obs and "did not answer" in obs and not terminated
    assert info["n_errors"] == 1 and "search failed" in info["error"]


def test_bugs_raise():
    env = SearchEnv(TASKS, BuggyRetriever())
    env.reset(options={"task": TASKS[0]})
    with pytest.raises(KeyError):
        env.step("<search>capital</search>")


def test_tool_calls_protocol(bm25):
    env = make_env(bm25, protocol="tool_calls")
    obs, _ = env.reset(options={"task": TASKS[0]})
    assert "<tools>" in obs
    obs, *_ = env.step(
        '<tool_call>{"name": "search", "arguments": {"query": "capital of France"}}</tool_call>'
    )
    assert obs.startswith("\n\n<tool_response>Doc 1(Title: Paris)")
    _, reward, terminated, _, _ = env.step(
        '<tool_call>{"name": "answer", "arguments": {"answer": "Paris"}}</tool_call>'
    )
    assert terminated and reward == 1.0


def test_reset_picks_tasks_reproducibly(bm25):
    env = make_env(bm25)
    picks = [env.reset(seed=s)[1]["task_id"] for s in range(20)]
    assert picks == [env.reset(seed=s)[1]["task_id"] for s in range(20)]
    assert set(picks) == {"t1", "t2"}
    assert env.reset(options={"task_index": 1})[1]["task_id"] == "t2"
    with pytest.raises(ValueError, match="unknown reset option"):
        env.reset(options={"tsk": TASKS[0]})


def test_step_outside_an_episode_raises(bm25):
    env = make_env(bm25)
    with pytest.raises(RuntimeError, match="call reset"):
        env.step("<answer>x</answer>")
    env.reset(options={"task": TASKS[0]})
    env.step("<answer>x</answer>")
    with pytest.raises(RuntimeError, match="call reset"):
        env.step("<answer>x</answer>")
    env.close()
    env.close()


def test_turn_limit_truncates_but_never_with_an_answer(bm25):
    env = TurnLimit(make_env(bm25), max_turns=2)
    env.reset(options={"task": TASKS[0]})
    assert env.step("<search>a</search>")[2:4] == (False, False)
    assert env.step("<search>b</search>")[2:4] == (False, True)
    env.reset(options={"task": TASKS[0]})
    env.step("<search>a</search>")
    assert env.step("<answer>Paris</answer>")[2:4] == (True, False)
    with pytest.raises(ValueError, match="max_turns"):
        TurnLimit(make_env(bm25), 0)


def test_spaces_accept_real_text(bm25):
    env = make_env(bm25)
    assert env.action_space.contains("<search>Zürich — 中文?</search>")
    assert isinstance(env.action_space.sample(), str)
    assert not isinstance(env.observation_space, gym.spaces.Text)
