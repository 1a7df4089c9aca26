"""`CachedPolicy` decodes like `HFPolicy`, on a random tiny Llama with SmolLM2's tokenizer."""

import weakref

import pytest
import torch
from test_hf_policy import CONVERSATIONS

from searchgym.agents.policies import cached
from searchgym.agents.policies.base import SamplingParams
from searchgym.agents.policies.cached import CachedPolicy
from searchgym.agents.policies.hf import HFPolicy
from searchgym.agents.policies.kv import with_cache
from searchgym.errors import ConfigError


@pytest.fixture(scope="module")
def hf(tiny_llama_dir):
    return HFPolicy(str(tiny_llama_dir), device="cpu")


@pytest.fixture()
def fast(tiny_llama_dir):
    return CachedPolicy(str(tiny_llama_dir), device="cpu")


def prompts_of(policy):
    return [policy.apply_chat_template(c) for c in CONVERSATIONS]


def assert_same(got, expected):
    """Equal completions, log-probs up to float rounding (the two batch rows differently)."""
    assert [(c.text, c.token_ids, c.finish_reason) for c in got] == [
        (c.text, c.token_ids, c.finish_reason) for c in expected
    ]
    for a, b in zip(got, expected):
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-4)


def test_greedy_matches_hf_token_for_token(hf, fast):
    params = SamplingParams(max_new_tokens=20, temperature=0.0)
    assert_same(fast.generate(prompts_of(fast), params), hf.generate(prompts_of(hf), params))


@pytest.mark.parametrize("temperature", [0.7, 1.0])
def test_sampled_logprobs_are_those_of_the_sampling_distribution(fast, temperature):
    prompts = prompts_of(fast)
    params = SamplingParams(max_new_tokens=12, temperature=temperature, top_p=0.9, seed=1)
    before = torch.random.get_rng_state()
    completions = fast.generate(prompts, params)
    assert torch.equal(before, torch.random.get_rng_state())  # a generator of its own
    for prompt, completion in zip(prompts, completions):
        ids = torch.tensor([prompt + completion.token_ids])
        with torch.no_grad():
            logits = fast.model(ids).logits[0, len(prompt) - 1 : -1].float()
        chosen = torch.tensor(completion.token_ids)[:, None]
        expected = torch.log_softmax(logits / temperature, -1).gather(1, chosen)[:, 0]
        assert completion.logprobs == pytest.approx(expected.tolist(), abs=2e-4)
    assert [c.token_ids for c in fast.generate(prompts, params)] == [c.token_ids for c in completions]


def test_stop_strings_and_end_of_sequence_follow_hf(hf, fast):
    free = hf.generate(prompts_of(hf), SamplingParams(max_new_tokens=12, temperature=0.0))
    stop = hf.tokenizer.decode(free[0].token_ids[2:4]).strip() or hf.tokenizer.decode(free[0].token_ids[:4])
    params = SamplingParams(max_new_tokens=12, temperature=0.0, stop=(stop,))
    assert_same(fast.generate(prompts_of(fast), params), hf.generate(prompts_of(hf), params))
    # row 0's third greedy token becomes an end-of-sequence token: kept, and the row ends there
    eos = free[0].token_ids[2]
    for policy in (hf, fast):
        policy.model.generation_config.eos_token_id = [policy.tokenizer.eos_token_id, eos]
    try:
        params = SamplingParams(max_new_tokens=12, temperature=0.0)
        got = fast.generate(prompts_of(fast), params)
        assert_same(got, hf.generate(prompts_of(hf), params))
        assert got[0].token_ids == free[0].token_ids[:3] and got[0].finish_reason == "stop"
    finally:
        for policy in (hf, fast):
            policy.model.generation_config.eos_token_id = policy.tokenizer.eos_token_id


def multi_turn(policy, reuse: bool):
    """Three turns of a growing stream per row, as `PolicyAgent` builds it."""
    params = SamplingParams(max_new_tokens=8, temperature=0.0)
    streams, turns = prompts_of(policy), []
    observation = policy.tokenizer.encode(" <information>Doc 1</information>", add_special_tokens=False)
    for _ in range(3):
        if not reuse and hasattr(policy, "store"):
            policy.store.clear()
        done = policy.generate(streams, params)
        turns.append([c.token_ids for c in done])
        streams = [s + c.token_ids + observation for s, c in zip(streams, done)]
    return turns


def test_multi_turn_with_cache_reuse_equals_without(fast, hf):
    with_reuse = multi_turn(fast, reuse=True)
    assert len(fast.store.entries) == len(CONVERSATIONS)  # the last turn's streams are kept
    assert with_reuse == multi_turn(fast, reuse=False)
    assert with_reuse == multi_turn(hf, reuse=False)
    fast.reseed(0)  # a trainer's refill round: the weights, and so the caches, still hold
    assert len(fast.store.entries) == len(CONVERSATIONS)
    fast.drop_caches()
    assert fast.store.entries == []


def test_an_extended_streams_cache_is_freed_before_decoding(fast):
    """A next turn copies its stream's kept keys and values into the call's buffers; the kept
    copy is freed then, not after decoding, so the two never add up to the call's peak."""
    params = SamplingParams(max_new_tokens=6, temperature=0.0)
    prompts = prompts_of(fast)
    first = fast.generate(prompts, params)
    kept = [weakref.ref(entry.kv[0][0]) for entry in fast.store.entries]
    alive: list[int] = []

    def count(module, args, kwargs):
        if kwargs["input_ids"].shape[1] == 1:  # a decoding step
            alive.append(sum(ref() is not None for ref in kept))

    hook = fast.model.register_forward_pre_hook(count, with_kwargs=True)
    try:
        fast.generate([p + c.token_ids + [13] for p, c in zip(prompts, first)], params)
    finally:
        hook.remove()
    assert alive and max(alive) == 0
    assert len(fast.store.entries) == len(prompts)  # the extended streams' entries replace them


def test_identical_prompts_are_prefilled_once_and_decode_alike(fast):
    prompt = prompts_of(fast)[0]
    done = fast.generate([prompt] * 4, SamplingParams(max_new_tokens=10, temperature=0.0))
    assert all(c.token_ids == done[0].token_ids for c in done)


@pytest.mark.parametrize("rollout_dtype", ["bfloat16", "int8"])
def test_a_weight_update_between_calls_is_honoured(tiny_llama_dir, rollout_dtype):
    fast = CachedPolicy(str(tiny_llama_dir), device="cpu", rollout_dtype=rollout_dtype)
    params = SamplingParams(max_new_tokens=6, temperature=0.0)
    prompt = prompts_of(fast)[0]
    first = fast.generate([prompt], params)[0]
    optimizer = torch.optim.SGD(fast.model.parameters(), lr=1.0)
    ids = torch.tensor([prompt + first.token_ids])
    fast.model(ids, labels=ids).loss.neg().backward()  # make the greedy continuation less likely
    optimizer.step()
    again = prompt + first.token_ids[:3]  # extends the cached stream: its cache must not be reused
    fresh = CachedPolicy(str(tiny_llama_dir), device="cpu", rollout_dtype=rollout_dtype)
    fresh.model.load_state_dict(fast.model.state_dict())
    assert_same(fast.generate([again], params), fresh.generate([again], params))
    assert fast.generate([prompt], params)[0].token_ids != first.token_ids
    with torch.no_grad():  # a write no version counter sees, announced by drop_caches
        for p, q in zip(fast.model.parameters(), fresh.model.parameters()):
            p.data.mul_(0.5)
            q.mul_(0.5)
    fast.drop_caches()
    assert_same(fast.generate([again], params), fresh.generate([again], params))


def test_int8_samples_from_a_copy_with_int8_blocks_and_a_float_model(tiny_llama_dir):
    """``rollout_dtype: int8``: the decoder blocks' linear layers but the MLPs' down projections
    compute in int8 in the copy that samples; the model the trainer updates stays float32."""
    policy = CachedPolicy(str(tiny_llama_dir), device="cpu", rollout_dtype="int8")
    quantized = {
        n for n, m in policy._copy.named_modules() if isinstance(m, torch.ao.nn.quantized.dynamic.Linear)
    }
    linear = {n for n, m in policy.model.named_modules() if isinstance(m, torch.nn.Linear)}
    assert quantized == {n for n in linear if ".layers." in n and not n.endswith("down_proj")}
    assert all(p.dtype == torch.float32 and p.requires_grad for p in policy.model.parameters())
    completion = policy.generate(prompts_of(policy)[:1], SamplingParams(max_new_tokens=6, temperature=1.0))[0]
    assert len(completion.token_ids) == len(completion.logprobs) > 0
    greedy = SamplingParams(max_new_tokens=6, temperature=0.0)
    exact = CachedPolicy(str(tiny_llama_dir), device="cpu")
    with policy.float_weights():
        assert_same(policy.generate(prompts_of(policy), greedy), exact.generate(prompts_of(exact), greedy))
    int8_logprobs = policy.generate(prompts_of(policy), greedy)[0].logprobs
    assert int8_logprobs != pytest.approx(exact.generate(prompts_of(exact), greedy)[0].logprobs, abs=1e-4)
    with pytest.raises(ConfigError, match="int8 runs on CPU only"):
        cached._dtype("int8", torch.device("cuda"))


def test_the_int8_copy_follows_the_weights_after_they_change(tiny_llama_dir):
    """After an update the copy holds the new weights, quantized as a new copy would quantize them."""
    from searchgym.agents.policies.int8 import int8_copy

    policy = CachedPolicy(str(tiny_llama_dir), device="cpu", rollout_dtype="int8")
    torch.manual_seed(0)
    with torch.no_grad():
        for p in policy.model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    ids = torch.tensor([prompts_of(policy)[0]])
    with torch.inference_mode():
        stale = policy._copy(ids).logits
        updated = policy._generator_model()(ids).logits
        assert torch.allclose(updated, int8_copy(policy.model)(ids).logits, atol=1e-5)
        assert not torch.allclose(updated, stale, atol=1e-3)


def test_backends_load_with_their_registered_arguments(tiny_llama_dir, tmp_path):
    """``cpu-bf16`` samples from a bfloat16 copy whether it is named as an agent or in a training
    config, and ``policy_kwargs`` reach the backend."""
    from searchgym.agents.registry import load_policy
    from searchgym.agents.train.config import GRPOConfig
    from searchgym.agents.train.engine import load_policies

    assert load_policy("cpu-bf16", str(tiny_llama_dir))._copy.dtype == torch.bfloat16
    assert load_policy("cpu", str(tiny_llama_dir))._copy is None
    cfg = GRPOConfig(model=str(tiny_llama_dir), policy="cpu-bf16", policy_kwargs={"max_batch_size": 3},
                     run_dir=str(tmp_path), progress=False)  # fmt: skip
    policy, rollout_policy = load_policies(cfg, torch.device("cpu"))
    assert rollout_policy is policy and policy.max_batch_size == 3
    assert policy.model.dtype == torch.float32 and policy._copy.dtype == torch.bfloat16


@pytest.mark.parametrize("native", [True, False])
def test_auto_samples_in_bfloat16_only_where_the_cpu_computes_it_natively(
    tiny_llama_dir, monkeypatch, native
):
    """``rollout_dtype: auto`` (the quickstart's): a bfloat16 copy on a CPU with AVX512-BF16 or
    AMX; elsewhere, where bfloat16 is emulated and slower than float32, the float32 model."""
    monkeypatch.setattr(cached, "bf16_supported", lambda: native)
    policy = CachedPolicy(str(tiny_llama_dir), device="cpu", rollout_dtype="auto")
    assert (policy._copy is not None and policy._copy.dtype == torch.bfloat16) == native
    with pytest.raises(
        ConfigError, match="rollout_dtype must be a torch dtype such as 'bfloat16', 'int8' or 'auto'"
    ):
        CachedPolicy(str(tiny_llama_dir), device="cpu", rollout_dtype="bf16")


def test_an_ended_episode_frees_its_keys_and_values(fast):
    """An agent that starts its next episode frees the last one's cache: after 6 episodes on 2
    agents the store holds the agents' latest 2, not all 6."""
    import searchgym
    from searchgym.agents.play.rollout import run_episodes
    from searchgym.agents.policies.agent import PolicyAgent

    def env():
        return searchgym.make("searchgym/FictionalQA-BM25-v0", n_passages=300, seed=0, max_turns=2)

    tasks = env().unwrapped.tasks[:6]
    params = SamplingParams(max_new_tokens=8, temperature=1.0)
    episodes = run_episodes(env, lambda: PolicyAgent(fast, params), tasks, n_envs=2)
    assert len(episodes) == 6 and len(fast.store.entries) == 2
    streams = [e.trajectory.prompt_ids + e.trajectory.ids for e in episodes]
    for entry in fast.store.entries:
        assert any(stream[: len(entry.ids)] == entry.ids for stream in streams)


def test_forgetting_drops_only_the_ended_streams_entry():
    from searchgym.agents.policies.kv import Entry, PrefixStore

    store = PrefixStore(1 << 20)
    store.add([Entry([1, 2, 3], []), Entry([1, 2, 4, 5], []), Entry([1, 2, 4, 5], [])])
    store.forget([1, 2, 4, 5, 6, 7])
    assert [e.ids for e in store.entries] == [[1, 2, 3], [1, 2, 4, 5]]  # its twin still serves
    store.forget([9])
    assert len(store.entries) == 2


def test_a_prompt_reuses_what_it_shares_with_other_streams(fast):
    """Every episode starts with the same instructions: a new episode's prompt prefills only what
    follows the part it shares with a kept stream (or an earlier row), and decodes as without."""
    prompts = prompts_of(fast)
    shared = next(i for i, (a, b) in enumerate(zip(*prompts[:2])) if a != b)
    assert shared > 10  # the chat template's system prompt
    fed: list[int] = []
    hook = fast.model.register_forward_pre_hook(
        lambda module, args, kwargs: fed.append(kwargs["input_ids"].shape[1]), with_kwargs=True
    )
    params = SamplingParams(max_new_tokens=6, temperature=0.0)
    try:
        first = fast.generate(prompts[:1], params)
        fed.clear()
        second = fast.generate(prompts[1:2], params)  # the store holds the first stream
        assert fed[0] == len(prompts[1]) - shared  # the prefill
        assert len(fast.store.entries) == 2  # a shared start is no extension: the first stays
        fast.store.clear()
        fed.clear()
        both = fast.generate(prompts[:2], params)  # one call: row 1 reuses row 0
        assert fed[:2] == [len(prompts[0]), len(prompts[1]) - shared]
    finally:
        hook.remove()
    assert [c.token_ids for c in both] == [first[0].token_ids, second[0].token_ids]
    fast.store.clear()
    assert fast.generate(prompts[1:2], params)[0].token_ids == second[0].token_ids


def test_a_model_not_yet_renamed_gets_its_cache_as_past_key_values():
    class Renamed(torch.nn.Module):
        def forward(self, input_ids, cache=None): ...

    class Old(torch.nn.Module):
        def forward(self, input_ids, past_key_values=None): ...

    wrapper = torch.nn.Module()
    wrapper.module = Old()  # as DDP holds it
    assert with_cache(Renamed(), "c") == {"cache": "c"}
    assert with_cache(Old(), "c") == with_cache(wrapper, "c") == {"past_key_values": "c"}
