"""The gateway speaks OpenAI's API to the official ``openai`` client: chat and text completions,
streamed or not, tools shown to the model and tool calls parsed back, and malformed requests
refused with OpenAI's error format and noted in their episode's log."""

import json

import httpx
import openai
import pytest
from scripted_policy import ScriptedPolicy
from transformers import AutoTokenizer

from searchgym.agents.gateway.chat import ChatPrompter
from searchgym.agents.gateway.server import Gateway
from searchgym.agents.policies.hf import HFPolicy
from searchgym.agents.policies.models import resolve_chat_template
from searchgym.generation import SamplingParams

SEARCH = [{"type": "function", "function": {"name": "search", "description": "Search.", "parameters": {
    "type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}}]  # fmt: skip


@pytest.fixture(scope="module")
def policy(tiny_llama_dir):
    return HFPolicy(str(tiny_llama_dir), device="cpu", dtype="float32", seed=0)


@pytest.fixture
def gateway(policy):
    with Gateway(policy, SamplingParams(max_new_tokens=6)) as gateway:
        yield gateway


def client_of(gateway, key):
    return openai.OpenAI(base_url=gateway.url + "/v1", api_key=key, max_retries=0)


def test_chat_completion_returns_the_text_of_the_sampled_ids_and_records_them(gateway, policy):
    key = gateway.open_episode("e")
    reply = client_of(gateway, key).chat.completions.create(
        model="any name", messages=[{"role": "user", "content": "Hi"}], logprobs=True
    )
    (call,) = gateway.close_episode(key).calls
    assert reply.choices[0].message.content == policy.tokenizer.decode(call.ids, skip_special_tokens=True)
    assert [t.logprob for t in reply.choices[0].logprobs.content] == call.logprobs
    assert reply.usage.prompt_tokens == len(call.prompt_ids) and reply.usage.completion_tokens == len(
        call.ids
    )
    assert call.prompt_ids == ChatPrompter(policy.tokenizer).prompt(
        [{"role": "user", "content": "Hi"}], None, []
    )
    assert reply.model == "any name"


def test_a_stream_carries_the_same_reply_and_usage(gateway):
    key = gateway.open_episode("e")
    messages = [{"role": "user", "content": "Hi"}]
    chunks = list(
        client_of(gateway, key).chat.completions.create(
            model="m", messages=messages, stream=True, stream_options={"include_usage": True}
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    finish = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    (call,) = gateway.close_episode(key).calls
    assert text == gateway.prompter.tokenizer.decode(call.ids, skip_special_tokens=True)
    assert finish == ["length" if len(call.ids) == 6 else "stop"]
    assert chunks[-1].usage.completion_tokens == len(call.ids)


def test_text_completions_take_text_or_token_ids_and_continue_from_sampled_tokens(gateway, policy):
    key = gateway.open_episode("e")
    client = client_of(gateway, key)
    first = client.completions.create(model="m", prompt="The capital of France is", max_tokens=4, logprobs=1)
    written = policy.tokenizer.decode(gateway._episodes[key].log.calls[0].ids, skip_special_tokens=True)
    client.completions.create(model="m", prompt="The capital of France is" + written + " Next:", max_tokens=3)
    client.completions.create(model="m", prompt=[1, 2, 3], max_tokens=2)
    calls = gateway.close_episode(key).calls
    assert first.choices[0].logprobs.token_logprobs == calls[0].logprobs
    assert (
        calls[1].prompt_ids[: len(calls[0].prompt_ids) + len(calls[0].ids)]
        == calls[0].prompt_ids + calls[0].ids
    )
    assert calls[2].prompt_ids == [1, 2, 3]


def test_max_tokens_and_stop_come_from_the_request_the_stop_string_left_out(policy):
    scripted = ScriptedPolicy(policy.tokenizer, ["Paris</answer> more"])
    with Gateway(scripted, SamplingParams(max_new_tokens=20)) as gateway:
        key = gateway.open_episode("e")
        reply = client_of(gateway, key).chat.completions.create(
            model="m", messages=[{"role": "user", "content": "Q"}], stop=["</answer>"], max_tokens=50
        )
        (call,) = gateway.close_episode(key).calls
    assert reply.choices[0].message.content == "Paris"  # OpenAI's API leaves the stop string out
    assert policy.tokenizer.decode(call.ids).startswith("Paris</answer>")  # the model wrote it: recorded


def test_tools_are_shown_by_the_template_or_written_in_the_qwen_way_and_calls_parsed(policy):
    messages = [{"role": "user", "content": "Who wrote Hamlet?"}]
    tokenizer = AutoTokenizer.from_pretrained(policy.tokenizer.name_or_path)
    smol = ChatPrompter(tokenizer)  # SmolLM2's template ignores tools: the gateway writes them in
    assert "<tools>" in smol.render(messages, SEARCH, generation_prompt=True)
    tokenizer.chat_template = resolve_chat_template("qwen2_5")
    qwen = ChatPrompter(tokenizer)  # Qwen2.5's shows them itself
    assert qwen.render(messages, SEARCH, True) == tokenizer.apply_chat_template(
        messages, tools=SEARCH, tokenize=False, add_generation_prompt=True
    )
    call = '<tool_call>\n{"name": "search", "arguments": {"query": "Hamlet author"}}\n</tool_call>'
    scripted = ScriptedPolicy(policy.tokenizer, [call])
    with Gateway(scripted, SamplingParams(max_new_tokens=40)) as gateway:
        key = gateway.open_episode("e")
        reply = client_of(gateway, key).chat.completions.create(model="m", messages=messages, tools=SEARCH)
        gateway.close_episode(key)
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    assert choice.message.tool_calls[0].function.name == "search"
    assert json.loads(choice.message.tool_calls[0].function.arguments) == {"query": "Hamlet author"}


def test_a_tool_result_after_a_tool_call_continues_the_sampled_stream(policy):
    """The conversation comes back with the assistant's tool call (as the client re-serialized
    it) and the tool's result: the prompt is the first call's tokens plus the template's boundary."""
    call = '<tool_call>\n{"name":"search","arguments":{"query":"x"}}\n</tool_call>'
    tokenizer = policy.tokenizer
    with Gateway(
        ScriptedPolicy(tokenizer, [call, "Shakespeare"]), SamplingParams(max_new_tokens=40)
    ) as gateway:
        key = gateway.open_episode("e")
        client = client_of(gateway, key)
        messages = [{"role": "user", "content": "Who wrote Hamlet?"}]
        reply = client.chat.completions.create(model="m", messages=messages, tools=SEARCH)
        tool_call = reply.choices[0].message.tool_calls[0]
        messages += [
            reply.choices[0].message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": tool_call.id, "content": "Hamlet is by Shakespeare."},
        ]
        client.chat.completions.create(model="m", messages=messages, tools=SEARCH)
        first, second = gateway.close_episode(key).calls
    assert second.prompt_ids[: len(first.prompt_ids) + len(first.ids)] == first.prompt_ids + first.ids
    boundary = tokenizer.decode(second.prompt_ids[len(first.prompt_ids) + len(first.ids) :])
    assert boundary.startswith("\n<|im_start|>tool\nHamlet is by Shakespeare.<|im_end|>")  # no separator lost
    assert boundary.endswith("<|im_start|>assistant\n")


@pytest.mark.parametrize(
    "body, param",
    [
        ({"messages": []}, "messages"),
        ({"messages": [{"role": "robot", "content": "x"}]}, "messages[0]"),
        ({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, "messages[0].content"),
        ({"messages": [{"role": "user", "content": "x"}], "n": 2}, "n"),
        ({"messages": [{"role": "user", "content": "x"}], "max_tokens": 0}, "max_tokens"),
        ({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "web"}]}, "tools"),
        (
            {"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": 1}]},
            "tools",
        ),
        ({"messages": [{"role": "assistant", "content": "x", "tool_calls": 5}]}, "messages[0].tool_calls"),
        ({"messages": [{"role": "user", "content": "x"}], "stop": [""]}, "stop"),
        (
            {"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_object"}},
            "response_format",
        ),
        ({"messages": [{"role": "user", "content": "x"}], "tool_choice": "required"}, "tool_choice"),
    ],
)
def test_malformed_requests_are_refused_and_noted_in_the_episode(gateway, body, param):
    key = gateway.open_episode("e")
    with pytest.raises(openai.BadRequestError) as error:
        client_of(gateway, key).chat.completions.create(model="m", **body)
    log = gateway.close_episode(key)
    assert error.value.body["param"] == param and error.value.body["type"] == "invalid_request_error"
    assert len(log.errors) == 1 and not log.calls


def test_a_body_that_is_not_json_is_refused(gateway):
    key = gateway.open_episode("e")
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    response = httpx.post(f"{gateway.url}/v1/chat/completions", content=b"{", headers=headers)
    assert response.status_code == 400 and "not JSON" in response.json()["error"]["message"]


def test_a_key_of_no_open_episode_is_refused(gateway):
    key = gateway.open_episode("e")
    gateway.close_episode(key)
    for k in (key, "sg-made-up"):
        with pytest.raises(openai.AuthenticationError):
            client_of(gateway, k).chat.completions.create(
                model="m", messages=[{"role": "user", "content": "x"}]
            )


def test_models_lists_the_policy(gateway, policy):
    assert [m.id for m in client_of(gateway, "any").models.list().data] == [policy.name]


def test_a_prompt_longer_than_the_models_context_is_refused_and_a_near_one_gets_what_room_is_left(gateway):
    key = gateway.open_episode("e")
    client = client_of(gateway, key)
    context = gateway.context
    with pytest.raises(openai.BadRequestError, match=f"the model reads at most {context}"):
        client.completions.create(model="m", prompt=[1] * context, max_tokens=2)
    client.completions.create(model="m", prompt=[1] * (context - 2), max_tokens=6)
    (call,) = gateway.close_episode(key).calls
    assert len(call.ids) <= 2
