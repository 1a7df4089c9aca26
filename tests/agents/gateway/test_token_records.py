"""The tokens the gateway records are the tokens the model read and sampled (the bug class behind
verl#6921, a separator lost at every assistant-to-tool boundary): every recorded log-prob is what
the model gives that token in its stream, every call's prompt is its stream up to that call, the
mask covers exactly the sampled tokens, and a stream decodes to the conversation the template
renders."""

from pathlib import Path

import pytest
import torch

from searchgym.agents.gateway.records import token_streams
from searchgym.agents.gateway.server import Gateway
from searchgym.agents.play.programs import ProgramPlayer, load_program
from searchgym.agents.policies.hf import HFPolicy
from searchgym.agents.train.scoring import target_logprobs
from searchgym.envs.registry import make
from searchgym.generation import SamplingParams

HERE = Path(__file__).parent
stripping_agent = load_program(f"{HERE / 'openai_agent.py'}:run")  # strips the replies it sends back

PARAMS = SamplingParams(max_new_tokens=6, temperature=1.0)


def chat_agent(question, client, tools):
    """Three turns, each reply sent back as the client returned it, then a search result."""
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": question}]
    for _ in range(3):
        reply = client.chat.completions.create(model="m", messages=messages)
        messages += [
            reply.choices[0].message.model_dump(exclude_none=True),
            {"role": "user", "content": tools.search(query=reply.choices[0].message.content or question)},
        ]
    return "unknown"


def text_agent(question, client, tools):
    """Search-R1 style over /v1/completions: the program appends each search's results itself."""
    prompt = f"Question: {question}\n<search>"
    for _ in range(2):
        reply = client.completions.create(model="m", prompt=prompt, stop=["</search>"])
        query = reply.choices[0].text
        results = tools.search(query=query or question)
        prompt += f"{query}</search>\n<information>{results}</information>\n<search>"
    return "unknown"


@pytest.fixture(scope="module")
def policy(tiny_llama_dir):
    return HFPolicy(str(tiny_llama_dir), device="cpu", dtype="float32", seed=0)


def play(policy, program, n=3):
    """Episodes of ``program`` on ``n`` dev tasks, and each one's raw calls (by task id)."""
    envs = [make("searchgym/FictionalQA-BM25-v0", split="dev", n_passages=300, max_turns=4) for _ in range(2)]
    tasks = list(envs[0].unwrapped.tasks[:n])
    logs = {}
    with Gateway(policy, PARAMS) as gateway:
        close = gateway.close_episode

        def close_and_keep(key):
            log = close(key)
            logs[log.name] = log  # the task's id
            return log

        gateway.close_episode = close_and_keep
        episodes = ProgramPlayer(program, gateway, time_limit_s=60).play(envs, tasks, PARAMS, seed=0)
    return episodes, [logs[e.task_id] for e in episodes]


@pytest.mark.parametrize("program, calls", [(chat_agent, 3), (stripping_agent, 2), (text_agent, 2)])
def test_each_program_gives_one_stream_whose_tokens_are_what_the_model_read_and_sampled(
    policy, program, calls
):
    episodes, logs = play(policy, program)
    for episode, log in zip(episodes, logs):
        assert episode.error is None and len(log.calls) == calls
        (stream,) = episode.streams  # every call continued the one before: merged
        tokens = stream.prompt_ids + stream.ids
        for call, start, end in zip(log.calls, stream.turn_starts, stream.turn_ends):
            n = len(stream.prompt_ids)
            assert tokens[: n + start] == call.prompt_ids  # the call's prompt is the stream so far
            assert stream.ids[start:end] == call.ids and stream.logprobs[start:end] == call.logprobs
        sampled = {i for s, e in zip(stream.turn_starts, stream.turn_ends) for i in range(s, e)}
        assert [i for i, m in enumerate(stream.mask) if m] == sorted(
            sampled
        )  # the mask is the sampled tokens
        assert_logprobs_recompute(policy, stream)


def assert_logprobs_recompute(policy, stream):
    ids = torch.tensor([stream.prompt_ids + stream.ids])
    target = torch.tensor([[0] * len(stream.prompt_ids) + stream.mask])
    with torch.no_grad():
        again = target_logprobs(policy.model, ids, torch.ones_like(ids), target)
    recorded = torch.tensor([lp for lp, m in zip(stream.logprobs, stream.mask) if m])
    torch.testing.assert_close(again, recorded, atol=1e-4, rtol=1e-4)


def test_a_chat_stream_decodes_to_the_conversation_the_template_renders(policy):
    """The model's replies as it wrote them, then the template's own boundaries: nothing dropped
    or doubled where a turn ends and the next message begins."""
    captured = {}

    def agent(question, client, tools):
        messages = [{"role": "user", "content": question}]
        for _ in range(2):
            reply = client.chat.completions.create(model="m", messages=messages)
            messages += [
                reply.choices[0].message.model_dump(exclude_none=True),
                {"role": "user", "content": "More."},
            ]
        captured["messages"] = messages
        return "x"

    episodes, _ = play(policy, agent, n=1)
    stream = episodes[0].streams[0]
    rendered = policy.tokenizer.apply_chat_template(captured["messages"][:-1], tokenize=False)
    seen = policy.tokenizer.decode(stream.prompt_ids + stream.ids, skip_special_tokens=False)
    assert (
        seen + "<|im_end|>\n" == rendered or seen == rendered
    )  # the last reply ended at its length or its end token


def test_calls_that_do_not_continue_each_other_are_streams_of_their_own(policy):
    def two_questions(question, client, tools):
        for text in (question, "Something else entirely."):
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": text}])
        return "x"

    episodes, logs = play(policy, two_questions, n=1)
    assert [s.prompt_ids for s in episodes[0].streams] == [c.prompt_ids for c in logs[0].calls]
    assert token_streams(logs[0].calls)[1].mask == [1] * len(logs[0].calls[1].ids)
