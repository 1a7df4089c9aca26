"""`PolicyAgent`: episodes as one token stream that never re-tokenizes what came before."""

import pytest
from scripted_policy import ScriptedPolicy
from transformers import AutoTokenizer

import searchgym
from searchgym.agents import run_episodes
from searchgym.agents.policies.agent import ChatFormat, PolicyAgent
from searchgym.agents.policies.base import SamplingParams
from searchgym.agents.policies.hf import HFPolicy
from searchgym.agents.policies.models import resolve_tokenizer
from searchgym.errors import ConfigError

SMALL_WORLD = {"n_passages": 300, "seed": 0}


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(resolve_tokenizer("smollm2-135m-instruct"))


def env(protocol="tags"):
    return searchgym.make("searchgym/FictionalQA-BM25-v0", protocol=protocol, **SMALL_WORLD)


def play(policy, protocol="tags", n=1, n_envs=1):
    tasks = env().unwrapped.tasks[:n]
    return run_episodes(lambda: env(protocol), lambda: PolicyAgent(policy), tasks, n_envs=n_envs), tasks


def test_inline_results_extend_the_assistant_turn(tokenizer):
    policy_texts = ["<think>x</think><search> capital </search>", "<answer> Oslo </answer>"]
    policy = ScriptedPolicy(tokenizer, logprob=-0.5, script=policy_texts)
    [episode], _ = play(policy)
    traj = episode.trajectory
    first, second = policy.prompts
    assert second == traj.prompt_ids + traj.ids[: len(second) - len(traj.prompt_ids)]  # no re-tokenizing
    observation = episode.turns[0].observation
    between = traj.ids[traj.turn_ends[0] : len(second) - len(traj.prompt_ids)]
    assert tokenizer.decode(between) == observation  # the result follows </search> directly
    generated = [tokenizer.encode(t, add_special_tokens=False) for t in policy_texts]
    assert [t for t, m in zip(traj.ids, traj.mask) if m] == generated[0] + generated[1]
    assert [lp for lp, m in zip(traj.logprobs, traj.mask) if m] == [-0.5] * sum(traj.mask)
    assert all(lp == 0.0 for lp, m in zip(traj.logprobs, traj.mask) if not m)


@pytest.fixture(params=["smollm2", "qwen2_5"])
def templated(request, tokenizer):
    """The chat templates in use: SmolLM2's own, and trl's Qwen2.5 template (trl_env's tool calls)."""
    if request.param == "smollm2":
        return tokenizer
    from trl.chat_template_utils import qwen2_5_chat_template

    copy = AutoTokenizer.from_pretrained(resolve_tokenizer("smollm2-135m-instruct"))
    copy.chat_template = qwen2_5_chat_template
    return copy


def test_results_come_as_messages_templated_by_the_chat_template(templated):
    """SmolLM2's template has no tool calling: results come as user messages. Qwen2.5's renders
    tools: they are in the prompt, the turn ends with end-of-sequence and results are tool messages."""
    tokenizer = templated
    call = '<tool_call>{"name": "search", "arguments": {"query": "capital"}}</tool_call>'
    answer = '<tool_call>{"name": "answer", "arguments": {"answer": "Oslo"}}</tool_call>'
    policy = ScriptedPolicy(tokenizer, logprob=-0.5, script=[call, answer])
    [episode], _ = play(policy, protocol="tool_calls")
    traj, second = episode.trajectory, policy.prompts[1]
    assert second == traj.prompt_ids + traj.ids[: len(second) - len(traj.prompt_ids)]
    question, info = env("tool_calls").reset(options={"task": env().unwrapped.tasks[0]})
    observation = episode.turns[0].observation
    tools = [t.schema() for t in info["protocol"].tools]
    if "tools" in tokenizer.chat_template:  # Qwen2.5's
        result = {"role": "tool", "name": "search", "content": info["protocol"].unwrap_result(observation)}
        kwargs = {"tools": tools}
    else:
        result, kwargs = {"role": "user", "content": observation}, {}
    messages = [{"role": "user", "content": question}, {"role": "assistant", "content": call}, result]
    expected = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True, **kwargs)
    assert tokenizer.decode(second) == expected  # as if the whole conversation had been templated
    assert ("<tool_response>\nDoc 1(Title: " in expected) == bool(kwargs)
    assert (traj.ids[traj.turn_ends[0] - 1] == tokenizer.eos_token_id) == bool(kwargs)  # learnt, not added


def test_an_end_of_sequence_token_closes_the_turn_even_with_inline_results(tokenizer):
    policy = ScriptedPolicy(tokenizer, logprob=-0.5, script=["I do not know.", "<answer> Oslo </answer>"])
    [episode], _ = play(policy)
    text = tokenizer.decode(policy.prompts[1])
    assert text.endswith(
        f"I do not know.<|im_end|>\n<|im_start|>user\n{episode.turns[0].observation}"
        "<|im_end|>\n<|im_start|>assistant\n"
    )
    assert text.count("<|im_end|>") == 4  # system, question, the model's own EOS, the new message


@pytest.mark.parametrize("protocol", ["tags", "tool_calls"])
def test_turn_starts_mark_what_the_policy_saw_before_each_turn(tokenizer, protocol):
    calls = {
        "tags": ["<search> capital </search>", "I do not know.", "<answer> Oslo </answer>"],
        "tool_calls": [
            '<tool_call>{"name": "search", "arguments": {"query": "capital"}}</tool_call>',
            "I do not know.",
            '<tool_call>{"name": "answer", "arguments": {"answer": "Oslo"}}</tool_call>',
        ],
    }[protocol]
    policy = ScriptedPolicy(tokenizer, logprob=-0.5, script=calls)
    [episode], _ = play(policy, protocol=protocol)
    traj = episode.trajectory
    assert len(traj.turn_starts) == len(traj.turn_ends) == len(policy.prompts) == 3
    for t, (start, end) in enumerate(zip(traj.turn_starts, traj.turn_ends)):
        assert traj.prompt_ids + traj.ids[:start] == policy.prompts[t]  # the context of turn t
        assert tokenizer.decode(traj.ids[start:end], skip_special_tokens=True) == calls[t]
        assert all(traj.mask[start:end])
        assert not any(traj.mask[traj.turn_ends[t - 1] : start]) if t else start == 0
    assert traj.turn_ends[-1] == len(traj.ids)


def test_agents_sharing_a_policy_act_in_one_call(tokenizer):
    script = ["<answer> a </answer>"] * 6
    policy = ScriptedPolicy(tokenizer, logprob=-0.5, script=script)
    episodes, _ = play(policy, n=6, n_envs=3)
    assert policy.calls == 2 and len(episodes) == 6 and all(ep.n_turns == 1 for ep in episodes)


def test_a_template_that_rewrites_history_is_refused(tokenizer):
    rewriting = AutoTokenizer.from_pretrained(resolve_tokenizer("smollm2-135m-instruct"))
    rewriting.chat_template = (  # drops earlier assistant turns, as some reasoning templates do
        "{% for m in messages %}{% if m.role != 'assistant' or loop.last %}"
        "<{{ m.role }}>{{ m.content }}</s>{% endif %}{% endfor %}"
        "{% if add_generation_prompt %}<assistant>{% endif %}"
    )
    with pytest.raises(ConfigError, match="changes earlier turns"):
        ChatFormat(rewriting).user_turn("observation")


def test_a_random_tiny_llama_plays_both_protocols(tiny_llama_dir):
    policy = HFPolicy(str(tiny_llama_dir), device="cpu")
    params = SamplingParams(max_new_tokens=24, temperature=1.0, seed=0)
    for protocol in ("tags", "tool_calls"):
        tasks = env().unwrapped.tasks[:4]
        episodes = run_episodes(
            lambda p=protocol: searchgym.make(
                "searchgym/FictionalQA-BM25-v0", protocol=p, max_turns=3, **SMALL_WORLD
            ),
            lambda: PolicyAgent(policy, params),
            tasks,
            n_envs=4,
        )
        for ep in episodes:
            traj = ep.trajectory
            assert ep.n_turns == len(traj.turn_ends) <= 3 and ep.truncated  # random text never answers
            assert len(traj.ids) == len(traj.mask) == len(traj.logprobs)
            assert all(lp < 0 for lp, m in zip(traj.logprobs, traj.mask) if m)


def test_eval_cli_runs_a_language_model_agent(tiny_llama_dir, tmp_path, capsys):
    from searchgym.cli import main

    name = f"hf:{tiny_llama_dir}"
    argv = ["eval", "--agent", f"oracle,{name}", "--n", "3", "--max-new-tokens", "8", "--no-progress"]
    argv += ["-E", "n_passages=300", "-E", "max_turns=5", "--out", str(tmp_path), "--json"]
    assert main(argv) == 0
    import json

    report = json.loads(capsys.readouterr().out)
    assert report["agents"]["oracle"]["all"]["em"] == 1.0
    assert report["agents"][name]["all"]["n"] == 3 and report["agents"][name]["all"]["em"] == 0.0
    assert len(list(tmp_path.glob("hf_*.jsonl"))) == 1


def self_search_env(max_turns=8):
    from searchgym.envs.self_search import SelfSearchEnv
    from searchgym.envs.wrappers import TurnLimit

    return TurnLimit(SelfSearchEnv(env().unwrapped.tasks[:4]), max_turns)


def test_self_written_information_is_kept_out_of_the_loss(tokenizer):
    texts = ["<search> capital </search>", "Oslo is a capital.</information>", "<answer> Oslo </answer>"]
    policy = ScriptedPolicy(tokenizer, logprob=-0.5, script=texts)
    tasks = env().unwrapped.tasks[:1]
    [episode] = run_episodes(self_search_env, lambda: PolicyAgent(policy), tasks)
    traj = episode.trajectory
    masks = [traj.mask[end - 1] for end in traj.turn_ends]
    assert masks == [1, 0, 1]  # the search, the self-written results, the answer
    info_ids = tokenizer.encode(texts[1], add_special_tokens=False)
    start = traj.turn_ends[1] - len(info_ids)
    assert traj.ids[start : traj.turn_ends[1]] == info_ids and not any(traj.mask[start : traj.turn_ends[1]])
    assert tokenizer.decode(policy.prompts[1]).endswith("<search> capital </search>\n\n<information>")


def test_a_random_tiny_llama_plays_self_search(tiny_llama_dir):
    policy = HFPolicy(str(tiny_llama_dir), device="cpu")
    params = SamplingParams(max_new_tokens=16, temperature=1.0, seed=0)
    tasks = env().unwrapped.tasks[:3]
    episodes = run_episodes(lambda: self_search_env(3), lambda: PolicyAgent(policy, params), tasks, n_envs=3)
    assert all(ep.truncated and len(ep.trajectory.turn_ends) == 3 for ep in episodes)
