"""`HFPolicy` on a random tiny Llama with SmolLM2's tokenizer: what training relies on."""

import pytest
import torch

from searchgym.agents.policies.base import Completion, SamplingParams
from searchgym.agents.policies.hf import HFPolicy
from searchgym.errors import ConfigError, DataNotFoundError

CONVERSATIONS = [
    [{"role": "user", "content": "Which river flows through Zürich?"}],
    [{"role": "user", "content": "Hi"}],
    [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "2 + 2?"}],
]


@pytest.fixture(scope="module")
def policy(tiny_llama_dir):
    return HFPolicy(str(tiny_llama_dir), device="cpu")


def teacher_forced_logprobs(policy, prompt, completion, temperature):
    ids = torch.tensor([prompt + completion.token_ids])
    with torch.no_grad():
        logits = policy.model(ids).logits[0, len(prompt) - 1 : -1].float()
    logp = torch.log_softmax(logits / temperature, dim=-1)
    return logp.gather(1, torch.tensor(completion.token_ids)[:, None])[:, 0].tolist()


@pytest.mark.parametrize("temperature", [0.0, 0.7, 1.0])
def test_logprobs_are_those_of_the_sampling_distribution(policy, temperature):
    prompts = [policy.apply_chat_template(c) for c in CONVERSATIONS]  # unequal lengths: left padding
    params = SamplingParams(max_new_tokens=12, temperature=temperature, top_p=0.9, seed=1)
    for prompt, completion in zip(prompts, policy.generate(prompts, params)):
        assert len(completion.token_ids) == len(completion.logprobs) > 0
        expected = teacher_forced_logprobs(policy, prompt, completion, temperature or 1.0)
        assert completion.logprobs == pytest.approx(expected, abs=2e-4)
        shown = [t for t in completion.token_ids if t != policy.tokenizer.eos_token_id]
        assert completion.text == policy.tokenizer.decode(shown)  # the end-of-sequence token is no text


def test_sampling_is_seeded_and_leaves_global_randomness_alone(policy):
    params = SamplingParams(max_new_tokens=16, temperature=1.0, seed=7)
    before = torch.random.get_rng_state()
    first = [c.token_ids for c in policy.chat(CONVERSATIONS, params)]
    assert torch.equal(before, torch.random.get_rng_state())
    assert [c.token_ids for c in policy.chat(CONVERSATIONS, params)] == first  # an explicit seed repeats
    other = [c.token_ids for c in policy.chat(CONVERSATIONS, SamplingParams(max_new_tokens=16, seed=8))]
    assert other != first


def test_without_a_seed_successive_calls_differ_but_runs_repeat(tiny_llama_dir):
    params = SamplingParams(max_new_tokens=16, temperature=1.0)
    runs = []
    for _ in range(2):
        policy = HFPolicy(str(tiny_llama_dir), device="cpu", seed=3)
        runs.append([[c.token_ids for c in policy.chat(CONVERSATIONS, params)] for _ in range(2)])
    assert runs[0] == runs[1] and runs[0][0] != runs[0][1]


def test_greedy_batch_equals_greedy_singles(policy):
    params = SamplingParams(max_new_tokens=10, temperature=0.0)
    together = [c.token_ids for c in policy.chat(CONVERSATIONS, params)]
    alone = [policy.chat([c], params)[0].token_ids for c in CONVERSATIONS]
    assert together == alone


def test_stop_strings_end_each_row_on_its_own(policy):
    free = policy.chat(CONVERSATIONS, SamplingParams(max_new_tokens=12, temperature=0.0))
    assert all(c.finish_reason == "length" and len(c.token_ids) == 12 for c in free)
    # a piece of row 0's greedy output, ending at its 4th token, becomes a stop string
    stop = policy.tokenizer.decode(free[0].token_ids[2:4]).strip() or policy.tokenizer.decode(
        free[0].token_ids[:4]
    )
    stopped = policy.chat(CONVERSATIONS, SamplingParams(max_new_tokens=12, temperature=0.0, stop=(stop,)))
    assert stopped[0].finish_reason == "stop" and stop in stopped[0].text
    assert (
        stopped[0].token_ids == free[0].token_ids[: len(stopped[0].token_ids)]
        and len(stopped[0].token_ids) <= 4
    )
    for before, after in zip(free[1:], stopped[1:]):
        if stop not in before.text:  # rows that never produce the stop string run on
            assert after.token_ids == before.token_ids


def test_an_end_of_sequence_token_is_kept_and_padding_dropped(policy):
    eos = policy.tokenizer.eos_token_id
    ids = policy.tokenizer.encode("<search> a </search>", add_special_tokens=False)
    params = SamplingParams(stop=("</search>",))
    cut = policy._completion(ids + [eos, eos], [-1.0] * (len(ids) + 2), params)
    assert (
        cut.token_ids == ids and cut.finish_reason == "stop"
    )  # the pad after a stop string is not the model's
    plain = policy.tokenizer.encode("done", add_special_tokens=False)
    cut = policy._completion(plain + [eos, eos, eos], [-1.0] * (len(plain) + 3), SamplingParams())
    assert cut.token_ids == plain + [eos] and len(cut.logprobs) == len(plain) + 1 and cut.text == "done"
    assert policy._completion(plain, [-1.0] * len(plain), SamplingParams()).finish_reason == "length"


def test_chat_is_generate_on_the_templated_prompt(policy):
    params = SamplingParams(max_new_tokens=8, temperature=0.0)
    prompt = policy.apply_chat_template(CONVERSATIONS[0])
    assert policy.tokenizer.decode(prompt).endswith("<|im_start|>assistant\n")
    assert policy.chat(CONVERSATIONS[:1], params)[0] == policy.generate([prompt], params)[0]


def test_bad_input_is_a_clear_error(policy, tmp_path):
    with pytest.raises(TypeError, match="token ids"):
        policy.generate(["a string"], SamplingParams())
    with pytest.raises(ValueError, match="at least one token"):
        policy.generate([[]], SamplingParams())
    with pytest.raises(TypeError, match="'role' and 'content'"):
        policy.chat([[{"content": "no role"}]], SamplingParams())
    with pytest.raises(ConfigError, match="temperature"):
        SamplingParams(temperature=-1)
    with pytest.raises(ConfigError, match="wrap a single stop string"):
        SamplingParams(stop="</search>")
    with pytest.raises(DataNotFoundError, match="cannot load model"):
        HFPolicy(str(tmp_path), device="cpu")


def test_completions_compare_by_value():
    assert Completion("a", [1], [-0.5]) == Completion("a", [1], [-0.5], "stop")


@pytest.mark.parametrize("show", [False, True])
def test_loading_bars_follow_show_progress(tiny_llama_dir, capfd, show):
    """`--no-progress` hides transformers' own "Loading weights" bar too."""
    HFPolicy(str(tiny_llama_dir), device="cpu", show_progress=show)
    assert ("Loading weights" in capfd.readouterr().err) == show


def test_reseed_gives_each_call_fresh_draws_and_repeats_from_the_reseed(policy):
    """What a multi-turn rollout needs: turns of one episode batch must not replay one another's
    random draws (an explicit ``params.seed`` would), yet a rerun from the same seed repeats."""
    params = SamplingParams(max_new_tokens=16, temperature=1.0)
    prompts = [policy.apply_chat_template(CONVERSATIONS[0])] * 4

    def two_turns():
        policy.reseed(11)
        return [[c.token_ids for c in policy.generate(prompts, params)] for _ in range(2)]

    first, second = two_turns()
    assert first != second and two_turns() == [first, second]


def test_a_misspelled_alias_fails_at_once_and_names_the_alias(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # offline: no retries against the hub
    with pytest.raises(DataNotFoundError, match="did you mean the offline alias 'smollm2-135m-instruct'"):
        HFPolicy("smollm2-135m-instrct")
