"""`PlannerEnv` (AI-SearchPlanner): the planner searches and finishes, a frozen generator answers
from what it found. A scripted generator stands in for a model."""

from __future__ import annotations

import threading

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import searchgym
from searchgym.agents import OracleAgent, run_episodes, summarize
from searchgym.envs.planner_env import FINISH, PlannerEnv, PlannerRewards, PlannerTurnLimit, plan_charges
from searchgym.envs.reader import NO_SEARCHES, ExtractiveReader, generator_prompt
from searchgym.envs.rewards import RewardWeights
from searchgym.errors import ConfigError, PolicyError, RetrieverError
from searchgym.generation import Completion, SamplingParams
from searchgym.retrievers import BM25
from searchgym.tasks.task import Task

ENV_ID = "searchgym/FictionalQA-Planner-v0"
SMALL_WORLD = {"n_passages": 300}
TASKS = [
    Task("t1", "What is the capital of France?", ("Paris",), evidence=("d1",)),
    Task("t2", "Where was Marie Curie born?", ("Warsaw",), evidence=("d6", "d7")),
]


class ScriptedGenerator:
    """Replies ``replies`` in turn (the last one from then on), records every prompt and the
    sampling settings; raises ``fail`` (an exception) on the next call when set. Holds a lock, as
    real clients do, so it cannot be deep-copied."""

    def __init__(self, *replies: str) -> None:
        self.replies = list(replies) or ["<answer>Paris</answer>"]
        self.prompts: list[str] = []
        self.params: list[SamplingParams] = []
        self.fail: Exception | None = None
        self.lock = threading.Lock()

    def chat(self, conversations, params):
        if self.fail is not None:
            error, self.fail = self.fail, None
            raise error
        self.params.append(params)
        replies = []
        for conv in conversations:
            self.prompts.append(conv[-1]["content"])
            replies.append(Completion(self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]))
        return replies


class FailingRetriever:
    def search(self, query, k):
        raise RetrieverError("the index server is down")

    def batch_search(self, queries, k):
        raise RetrieverError("the index server is down")


@pytest.fixture(scope="module")
def bm25(tiny_corpus_path):
    return BM25.from_corpus(tiny_corpus_path)


def make_env(bm25, generator=None, **kwargs):
    return PlannerEnv(TASKS, bm25, generator or ScriptedGenerator(), **kwargs)


@pytest.mark.parametrize("protocol", ["tags", "tool_calls"])
def test_passes_gymnasium_env_checker(bm25, protocol):
    check_env(make_env(bm25, protocol=protocol), skip_render_check=True)


def test_the_planner_searches_and_finishes_and_the_generator_answers_from_what_it_found(bm25):
    generator = ScriptedGenerator("<think>The documents say Paris.</think><answer> Paris </answer>")
    env = make_env(bm25, generator)
    obs, info = env.reset(options={"task": TASKS[0]})
    assert "You do not answer it yourself" in obs and "<finish></finish>" in obs and "<answer>" not in obs
    assert obs.rstrip().endswith("Question: What is the capital of France?")
    assert info["n_turns"] == 0 and info["episode_cost"] == 0.0

    obs, reward, terminated, truncated, info = env.step("<search>capital of France</search>")
    assert obs.startswith("\n\n<information>Doc 1(Title: Paris)")
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert info["tool"] == "search" and info["doc_ids"][0] == "d1" and not generator.prompts

    obs, reward, terminated, truncated, info = env.step("<think>Enough.</think><finish></finish>")
    assert (obs, reward, terminated, truncated) == ("", 1.0, True, False)
    (prompt,) = generator.prompts
    assert "Search 1: capital of France\nDoc 1(Title: Paris) Paris is the capital" in prompt
    assert prompt.endswith("Question: What is the capital of France?")
    assert "Enough." not in prompt  # the planner's reasoning is not shown to the generator
    assert generator.params == [SamplingParams(max_new_tokens=64, temperature=0.0, stop=("</answer>",))]
    assert info["prediction"] == "Paris" and (info["em"], info["f1"], info["cover_em"]) == (1.0, 1.0, 1.0)
    assert info["generator_reply"].startswith("<think>The documents say Paris.</think>")
    assert info["evidence_recall"] == 1.0 and info["n_searches"] == 1 and info["n_turns"] == 2
    assert info["reward_components"] == {
        "outcome": 1.0,
        "format": 1.0,
        "search_calls": 0.0,
        "obs_tokens_1k": 0.0,
        "turns": 1.0,  # charged, at weight 0
    }
    with pytest.raises(RuntimeError, match="call reset"):
        env.step("<finish></finish>")


def test_finishing_at_once_shows_the_generator_no_results_and_a_reply_without_tags_is_the_answer(bm25):
    generator = ScriptedGenerator("  I think it is Lyon.  ")
    env = make_env(bm25, generator)
    env.reset(options={"task": TASKS[0]})
    *_, info = env.step("<finish></finish>")
    assert NO_SEARCHES in generator.prompts[0]
    assert (
        info["prediction"] == "I think it is Lyon." and info["em"] == 0.0 and info["evidence_recall"] == 0.0
    )


def test_tool_calls_protocol_finishes_with_empty_arguments(bm25):
    env = make_env(bm25, protocol="tool_calls")
    obs, _ = env.reset(options={"task": TASKS[0]})
    assert '"name": "finish"' in obs and "call `answer`" not in obs
    _, reward, terminated, _, info = env.step('<tool_call>{"name": "finish", "arguments": {}}</tool_call>')
    assert terminated and reward == 1.0 and info["tool"] == "finish"


def test_the_planner_cannot_answer(bm25):
    env = make_env(bm25)
    env.reset(options={"task": TASKS[0]})
    obs, reward, terminated, _, info = env.step("<answer>Paris</answer>")
    assert not terminated and reward == 0.0 and info["error"] == "no action found"
    obs, _, terminated, _, info = env.step("<finish>Paris</finish>")
    assert not terminated and "finish takes no argument" in info["error"] and "<finish></finish>" in obs


@pytest.mark.parametrize(
    ("weights", "expected_cost"),
    [
        (RewardWeights(), 0.0),
        (RewardWeights(per_search=0.1), 0.2),
        (PlannerRewards(per_turn=0.05), 0.2),  # 4 turns: two searches, one invalid action, finish
        (PlannerRewards(per_search=0.1, per_turn=0.05), 0.4),
    ],
)
def test_rewards_are_the_outcome_and_format_less_the_plan_cost(bm25, weights, expected_cost):
    env = make_env(bm25, rewards=weights)
    env.reset(options={"task": TASKS[0]})
    total, costs = 0.0, 0.0
    for action in (
        "<search>capital of France</search>",
        "oops",
        "<search>Seine</search>",
        "<finish></finish>",
    ):
        _, reward, terminated, _, info = env.step(action)
        total += reward
        costs += env.unwrapped.rubric.cost(info["reward_components"])
    assert terminated and info["em"] == 1.0
    assert costs == pytest.approx(expected_cost) and info["episode_cost"] == pytest.approx(expected_cost)
    assert info["reward_components"]["format"] == 0.0  # one action was invalid
    assert total == pytest.approx(1.0 - expected_cost)
    assert env.unwrapped.rubric.cost(plan_charges(2, 4, 0)) == pytest.approx(expected_cost)


def test_cost_per_observation_token_and_the_format_weight(bm25):
    env = make_env(bm25, rewards=RewardWeights(per_1k_obs_tokens=1.0, format=0.5))
    env.reset(options={"task": TASKS[0]})
    _, reward, _, _, info = env.step("<search>capital of France</search>")
    assert reward == pytest.approx(-info["step_obs_tokens"] / 1000)
    _, reward, _, _, info = env.step("<finish></finish>")
    assert reward == pytest.approx(1.5)


@pytest.mark.parametrize(
    ("reply", "charged"), [("<answer>Paris</answer>", 0.2), ("<answer>Lyon</answer>", 0.0)]
)
def test_cost_only_if_correct_charges_the_whole_plan_at_the_end(bm25, reply, charged):
    rewards = PlannerRewards(per_search=0.1, per_turn=0.05, cost_only_if_correct=True)
    env = make_env(bm25, ScriptedGenerator(reply), rewards=rewards)
    env.reset(options={"task": TASKS[0]})
    _, reward, *_ = env.step("<search>capital of France</search>")
    assert reward == 0.0
    _, reward, _, _, info = env.step("<finish></finish>")  # 1 search, 2 turns
    assert env.unwrapped.rubric.cost(info["reward_components"]) == pytest.approx(charged)
    assert reward == pytest.approx(info["em"] - charged)


def test_a_generator_failure_is_shown_to_the_planner_which_may_finish_again(bm25):
    generator = ScriptedGenerator()
    env = make_env(bm25, generator, rewards=PlannerRewards(per_turn=0.1))
    env.reset(options={"task": TASKS[0]})
    generator.fail = PolicyError("http://127.0.0.1:8000/v1 failed after 3 attempt(s): connection refused")
    obs, reward, terminated, truncated, info = env.step("<finish></finish>")
    assert not terminated and not truncated and reward == pytest.approx(-0.1)
    assert "The answering model failed" in obs and "connection refused" in obs and "<information>" in obs
    assert info["n_errors"] == 1 and info["error"].startswith("the generator failed: PolicyError")
    assert "prediction" not in info
    _, reward, terminated, _, info = env.step("<finish></finish>")
    assert terminated and info["prediction"] == "Paris" and reward == pytest.approx(0.9)


def test_a_bug_in_the_generator_is_not_hidden(bm25):
    generator = ScriptedGenerator()
    env = make_env(bm25, generator)
    env.reset(options={"task": TASKS[0]})
    generator.fail = TypeError("unexpected keyword")
    with pytest.raises(TypeError, match="unexpected keyword"):
        env.step("<finish></finish>")


def test_a_retriever_failure_is_an_observation(tiny_corpus_path):
    env = PlannerEnv(TASKS, FailingRetriever(), ScriptedGenerator())
    env.reset(options={"task": TASKS[0]})
    obs, _, terminated, _, info = env.step("<search>capital</search>")
    assert "Search failed (RetrieverError: the index server is down)" in obs and not terminated
    assert info["n_errors"] == 1 and info["error"].startswith("search failed")


def test_at_the_turn_limit_the_generator_still_answers_without_a_format_score(bm25):
    generator = ScriptedGenerator()
    env = PlannerTurnLimit(make_env(bm25, generator, rewards=RewardWeights(format=0.5)), max_turns=2)
    env.reset(options={"task": TASKS[0]})
    env.step("<search>capital of France</search>")
    obs, reward, terminated, truncated, info = env.step("<search>Paris river</search>")
    assert truncated and not terminated
    assert len(generator.prompts) == 1 and "Search 2: Paris river" in generator.prompts[0]
    assert info["prediction"] == "Paris" and info["em"] == 1.0 and reward == 1.0
    assert info["reward_components"]["format"] == 0.0 and info["error"] is None


def test_a_generator_failure_at_the_turn_limit_ends_the_episode_unanswered(bm25):
    generator = ScriptedGenerator()
    env = PlannerTurnLimit(make_env(bm25, generator), max_turns=1)
    env.reset(options={"task": TASKS[0]})
    generator.fail = TimeoutError("timed out")
    _, reward, terminated, truncated, info = env.step("nonsense")
    assert truncated and not terminated and reward == 0.0 and "prediction" not in info
    assert info["error"] == "no action found; the generator failed: TimeoutError: timed out"
    assert info["n_errors"] == 1


def test_bad_arguments_are_clear_errors(bm25):
    with pytest.raises(ConfigError, match=r"chat\(conversations, params\)"):
        PlannerEnv(TASKS, bm25, generator="gpt-4")
    with pytest.raises(ValueError, match="needs the tools search and finish"):
        from searchgym.envs.protocols import TagsProtocol
        from searchgym.envs.tools import ANSWER, SEARCH

        PlannerEnv(TASKS, bm25, ScriptedGenerator(), protocol=TagsProtocol((SEARCH, ANSWER)))
    with pytest.raises(ConfigError, match="per_turn is a cost"):
        PlannerRewards(per_turn=-1)
    assert FINISH.params == ()


def test_extractive_reader_reads_the_last_new_top_document():
    reader = ExtractiveReader()

    def read(searches):
        prompt = generator_prompt("Who is the mayor of the city where Ada Quell was born?", searches)
        return reader.chat([[{"role": "user", "content": prompt}]], SamplingParams())[0].text

    hop1 = ("Ada Quell born", "Doc 1(Title: Ada Quell) Ada Quell was born in 1911 in Orvo.")
    hop2 = ("Orvo mayor", "Doc 1(Title: Orvo) Orvo is a city. The mayor of the city is Bo Lind.")
    assert read([hop1]) == "<answer>Orvo</answer>"
    assert read([hop1, hop2]) == "<answer>Bo Lind</answer>"
    assert read([hop1, hop2, ("Ada Quell", hop1[1])]) == "<answer>Bo Lind</answer>"  # nothing new
    assert read([("x", "No results found.")]) == "<answer>unknown</answer>"
    assert read([]) == "<answer>unknown</answer>"
    with pytest.raises(ConfigError, match="reads the prompts of searchgym.envs.reader.generator_prompt"):
        reader.chat([[{"role": "user", "content": "What is 2 + 2?"}]], SamplingParams())


def test_registered_env_with_the_default_reader_rewards_searching_every_hop():
    env = searchgym.make(ENV_ID, **SMALL_WORLD)
    assert isinstance(env.unwrapped.generator, ExtractiveReader)
    tasks = [t for t in env.unwrapped.tasks if t.metadata["hops"] == 2][:20]
    episodes = run_episodes(lambda: searchgym.make(ENV_ID, **SMALL_WORLD), OracleAgent, tasks, n_envs=2)
    metrics = summarize(episodes)
    assert metrics["searches"] == 2.0 and metrics["invalid_rate"] == 0.0 and metrics["truncated"] == 0.0
    assert metrics["em"] >= 0.2  # the reader's extraction is rough, but it reads the second hop
    assert all(ep.turns[-1].tool == "finish" and ep.prediction for ep in episodes)


def test_spec_shares_the_generator_so_the_env_can_be_made_again():
    generator = ScriptedGenerator()  # its lock makes a deep copy fail
    env = gym.make(ENV_ID, generator=generator, **SMALL_WORLD)
    assert env.spec.kwargs["generator"] is generator
    again = gym.make(env.spec)
    assert again.unwrapped.generator is generator and again.unwrapped is not env.unwrapped
    env.close(), again.close()


def test_factory_options():
    env = searchgym.make(
        ENV_ID,
        generator_params={"max_new_tokens": 16},
        rewards={"per_search": 0.1, "per_turn": 0.02},
        top_k=2,
        max_turns=3,
        **SMALL_WORLD,
    )
    inner = env.unwrapped
    assert inner.generator_params.max_new_tokens == 16 and inner.generator_params.stop == ("</answer>",)
    assert inner.rewards == PlannerRewards(per_search=0.1, per_turn=0.02) and inner.top_k == 2
    with pytest.raises(ConfigError, match=r"unknown env option\(s\) \['topk'\]"):
        searchgym.make(ENV_ID, topk=2, **SMALL_WORLD)
    with pytest.raises(ConfigError, match=r"unknown reward weight\(s\) \['per_tern'\]"):
        searchgym.make(ENV_ID, rewards={"per_tern": 0.1}, **SMALL_WORLD)
    with pytest.raises(ConfigError, match=r"unknown generator_params field\(s\) \['tokens'\]"):
        searchgym.make(ENV_ID, generator_params={"tokens": 3}, **SMALL_WORLD)


def test_the_gain_beyond_rag_compares_the_plans_answer_with_naive_retrievals(bm25):
    """s3's gain beyond RAG: at finish the generator answers from the plan's results, then from
    naive retrieval of the question (once per task, then kept); the term is the difference of
    the two answers' scores, weighed into the reward, and 0 at every other step."""
    generator = ScriptedGenerator("<answer>Paris</answer>", "<answer>Lyon</answer>")  # the plan's, naive's
    env = make_env(bm25, generator, rewards={"beyond_rag": 0.5})
    env.reset(options={"task": TASKS[0]})
    _, reward, *_, info = env.step("<search> capital of France </search>")
    assert info["reward_components"]["beyond_rag"] == 0.0 and reward == 0.0
    _, reward, *_, info = env.step("<finish></finish>")
    assert info["reward_components"]["beyond_rag"] == 1.0  # the plan's answer right (1), naive's wrong (0)
    assert reward == pytest.approx(1.0 + 0.5 * 1.0)
    plan_prompt, naive_prompt = generator.prompts
    assert "Search 1: capital of France" in plan_prompt
    assert f"Search 1: {TASKS[0].question}\nDoc 1(" in naive_prompt  # the question's own top results
    env.reset(options={"task": TASKS[0]})
    env.step("<finish></finish>")
    assert len(generator.prompts) == 3  # the naive answer's score was kept: one call
    assert "beyond_rag" not in make_env(bm25).rubric.weights()  # unweighed: not computed, not reported
