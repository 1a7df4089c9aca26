"""Information gain (IGPO): teacher-forced answer log-probs on the tiny random Llama, checked
against single unpadded forwards, and the per-turn probabilities of recorded episodes."""

import math

import pytest
import torch
from scripted_policy import ScriptedPolicy
from transformers import AutoModelForCausalLM, AutoTokenizer

import searchgym
from searchgym.agents import run_episodes
from searchgym.agents.policies.agent import PolicyAgent, Trajectory
from searchgym.agents.train.info_gain import (
    answer_logprob,
    answer_tokens,
    batch_turn_answer_probabilities,
    information_gain,
    score_answers,
    turn_answer_probabilities,
)
from searchgym.envs.protocols import make_protocol
from searchgym.errors import ConfigError


@pytest.fixture(scope="module")
def model(tiny_llama_dir):
    return AutoModelForCausalLM.from_pretrained(tiny_llama_dir, dtype=torch.float32)


@pytest.fixture(scope="module")
def tokenizer(tiny_llama_dir):
    return AutoTokenizer.from_pretrained(tiny_llama_dir)


def by_hand(model, context, prefix, answer):
    """Mean log-prob of ``answer``, one unpadded forward per context."""
    ids = torch.tensor([[*context, *prefix, *answer]])
    with torch.no_grad():
        logprobs = torch.log_softmax(model(input_ids=ids).logits[0].float(), -1)
    start = len(context) + len(prefix)
    return sum(float(logprobs[start + j - 1, a]) for j, a in enumerate(answer)) / len(answer)


CONTEXTS = [list(range(100, 100 + n)) for n in (3, 17, 1, 40, 9)]


def test_answer_logprob_equals_single_unpadded_forwards(model):
    prefix, answer = [7, 8], [300, 301, 302]
    got = answer_logprob(model, CONTEXTS, answer, prefix=prefix)
    expected = torch.tensor([by_hand(model, c, prefix, answer) for c in CONTEXTS])
    assert got.shape == (len(CONTEXTS),) and got.dtype == torch.float32
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)
    assert len(set(got.tolist())) == len(CONTEXTS)  # the contexts matter


def test_batch_size_and_order_do_not_change_results(model):
    answer = [300, 301]
    full = answer_logprob(model, CONTEXTS, answer, batch_size=8)
    for batch_size in (1, 2, 3):
        torch.testing.assert_close(
            answer_logprob(model, CONTEXTS, answer, batch_size=batch_size), full, atol=1e-5, rtol=0
        )
    reversed_ = answer_logprob(model, CONTEXTS[::-1], answer, batch_size=2)
    torch.testing.assert_close(reversed_, full.flip(0), atol=1e-5, rtol=0)


def test_prefix_is_conditioned_on_but_not_scored(model):
    context, answer = CONTEXTS[1], [300, 301]
    with_prefix = float(answer_logprob(model, [context], answer, prefix=[5, 6])[0])
    assert with_prefix == pytest.approx(by_hand(model, context, [5, 6], answer), abs=1e-5)
    # the same tokens as context give the same score: only the answer is averaged
    assert float(answer_logprob(model, [[*context, 5, 6]], answer)[0]) == pytest.approx(with_prefix, abs=1e-5)


def test_rows_with_their_own_answers_and_the_model_mode(model):
    rows = [(CONTEXTS[0], [7], [300]), (CONTEXTS[3], [], [301, 302, 303, 304]), ([], [9], [305, 306])]
    model.train()
    got = score_answers(model, rows, batch_size=2)
    assert model.training  # restored
    model.eval()
    expected = torch.tensor([by_hand(model, *row) for row in rows])
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)
    assert all(p.grad is None for p in model.parameters())


def test_bad_rows_are_refused(model):
    with pytest.raises(ValueError, match="the answer has no tokens"):
        answer_logprob(model, [[1, 2]], [])
    with pytest.raises(ValueError, match="needs a context or prefix"):
        answer_logprob(model, [[]], [5])
    with pytest.raises(ConfigError, match="batch_size must be a positive integer"):
        answer_logprob(model, [[1]], [5], batch_size=0)
    assert answer_logprob(model, [], [5]).shape == (0,)


def test_answer_tokens_follow_the_protocol(tokenizer):
    prefix, answer = answer_tokens(tokenizer, make_protocol("tags"), "Seivix Company")
    assert tokenizer.decode(prefix) == "<answer>" and tokenizer.decode(answer) == " Seivix Company"
    full = tokenizer.encode("<answer> Seivix Company </answer>", add_special_tokens=False)
    assert full[: len(prefix) + len(answer)] == prefix + answer  # as the policy writes it
    prefix, answer = answer_tokens(tokenizer, make_protocol("tool_calls"), 'say "hi"')
    assert tokenizer.decode(prefix) == '<tool_call>\n{"name": "answer", "arguments": {"answer": "'
    assert tokenizer.decode(answer) == 'say \\"hi\\"'  # JSON-escaped, as the call is written
    prefix, answer = answer_tokens(tokenizer, make_protocol("tags"), "1887")
    assert tokenizer.decode(prefix) == "<answer> " and tokenizer.decode(answer) == "1887"


def test_answer_tokens_need_an_answer_tool_and_an_answer(tokenizer):
    from searchgym.envs.tools import SEARCH

    with pytest.raises(ConfigError, match="no one-argument 'answer' tool"):
        answer_tokens(tokenizer, make_protocol("tags", tools=(SEARCH,)), "x")
    with pytest.raises(ConfigError, match="the gold answer is empty"):
        answer_tokens(tokenizer, make_protocol("tags"), "  ")


def test_turn_probabilities_score_the_context_before_each_turn(model, tokenizer):
    world = {"n_passages": 300, "seed": 0}
    env = searchgym.make("searchgym/FictionalQA-BM25-v0", **world)
    task = env.unwrapped.tasks[0]
    texts = ["<search> a </search>", "no idea", f"<search> {task.question} </search>", "<answer> x </answer>"]
    [episode] = run_episodes(lambda: env, lambda: PolicyAgent(ScriptedPolicy(tokenizer, texts)), [task])
    traj = episode.trajectory
    prefix, answer = answer_tokens(tokenizer, env.unwrapped.protocol, task.answers[0])
    probabilities = turn_answer_probabilities(model, traj, answer, prefix)
    assert len(probabilities) == episode.n_turns == 4
    assert all(0 < p <= 1 for p in probabilities)
    contexts = [traj.prompt_ids + traj.ids[:s] for s in traj.turn_starts]
    assert contexts[0] == traj.prompt_ids  # p_0: the question alone
    expected = [math.exp(by_hand(model, c, prefix, answer)) for c in contexts]
    assert probabilities == pytest.approx(expected, rel=1e-4)
    assert information_gain(probabilities) == pytest.approx(
        [b - a for a, b in zip(expected, expected[1:])], abs=1e-5
    )
    # many trajectories with their own answers: one call, the same numbers
    other = answer_tokens(tokenizer, env.unwrapped.protocol, "Oslo")
    both = batch_turn_answer_probabilities(model, [traj, traj], [(prefix, answer), other])
    assert both[0] == pytest.approx(probabilities, rel=1e-4) and len(both[1]) == 4
    assert both[1] == pytest.approx(turn_answer_probabilities(model, traj, other[1], other[0]), rel=1e-4)
    one_by_one = batch_turn_answer_probabilities(model, [traj, traj], [(prefix, answer), other], batch_size=1)
    assert one_by_one == [pytest.approx(p, rel=1e-4) for p in both]  # padding changes nothing


def test_trajectories_without_turn_starts_are_refused(model):
    traj = Trajectory([1, 2, 3], [4, 5], [1, 1], [0.0, 0.0], turn_ends=[2])
    with pytest.raises(ValueError, match="no turn_starts"):
        turn_answer_probabilities(model, traj, [5], [])
    with pytest.raises(ValueError, match="one answer per trajectory"):
        batch_turn_answer_probabilities(model, [traj], [])


def test_information_gain_is_the_rise_between_turns():
    assert information_gain([0.1, 0.25, 0.2, 0.9]) == pytest.approx([0.15, -0.05, 0.7])
    assert information_gain([0.5]) == [] and information_gain([]) == []


def test_models_without_logits_to_keep_give_the_same_scores(model, monkeypatch):
    import searchgym.agents.train.scoring as scoring

    sliced = answer_logprob(model, CONTEXTS, [300, 301], prefix=[7])
    monkeypatch.setattr(scoring, "takes_logits_to_keep", lambda model: False)
    torch.testing.assert_close(
        answer_logprob(model, CONTEXTS, [300, 301], prefix=[7]), sliced, atol=1e-5, rtol=0
    )


def test_the_cpu_engines_kept_caches_give_the_same_probabilities(tiny_llama_dir, tokenizer):
    """The trainer takes each episode's keys and values from the CPU engine that just played it
    instead of reading the episode again: the probabilities must be those of a fresh read."""
    from searchgym.agents.policies.cached import CachedPolicy
    from searchgym.generation import SamplingParams

    policy = CachedPolicy(str(tiny_llama_dir), device="cpu", dtype="float32", seed=0)
    env_kwargs = {"n_passages": 300, "seed": 0, "max_turns": 3}
    tasks = searchgym.make("searchgym/FictionalQA-BM25-v0", **env_kwargs).unwrapped.tasks[:3]
    params = SamplingParams(max_new_tokens=8, temperature=1.0)
    episodes = run_episodes(
        lambda: searchgym.make("searchgym/FictionalQA-BM25-v0", **env_kwargs),
        lambda: PolicyAgent(policy, params),
        tasks,
        n_envs=3,
    )
    trajectories = [e.trajectory for e in episodes]
    assert all(len(t.turn_starts) > 1 for t in trajectories)  # a cache to reuse, turns to score
    protocol = make_protocol("tags")
    answers = [answer_tokens(tokenizer, protocol, t.answers[0]) for t in tasks]
    hits = []

    def cached(ids, n):
        kept = policy.cached_kv(ids, n)
        hits.append(kept is not None)
        return kept

    reused = batch_turn_answer_probabilities(policy.model, trajectories, answers, cached)
    assert hits == [True] * 3
    read_again = batch_turn_answer_probabilities(policy.model, trajectories, answers)
    for a, b in zip(reused, read_again):
        assert a == pytest.approx(b, rel=1e-4)
    with torch.no_grad():  # an optimizer step moves the weights: the kept caches no longer apply
        next(policy.model.parameters()).add_(0.0)
    assert policy.cached_kv(trajectories[0].prompt_ids, 2) is None
