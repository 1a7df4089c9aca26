"""`OpenAIPolicy` against a scripted OpenAI-compatible server on loopback."""

import contextlib
import socket
import types

import httpx
import pytest
from openai_server import OpenAIServer, Reply, echo, token_id, token_logprob, tokens_of

import searchgym
from searchgym.agents import run_episodes
from searchgym.agents.policies import openai as module
from searchgym.agents.policies.agent import PolicyAgent
from searchgym.agents.policies.base import SamplingParams
from searchgym.agents.policies.openai import OpenAIPolicy, retry_after
from searchgym.errors import ConfigError, PolicyError
from searchgym.generation import request_seed

PARAMS = SamplingParams(max_new_tokens=64, temperature=0.0)


def user(text):
    return [{"role": "user", "content": text}]


@contextlib.contextmanager
def served(script=echo, *, report_stop_reason=True, **policy_kwargs):
    """A scripted server and a policy talking to it."""
    with (
        OpenAIServer(script, report_stop_reason=report_stop_reason) as server,
        OpenAIPolicy("m", base_url=server.url, **policy_kwargs) as policy,
    ):
        yield server, policy


@pytest.fixture
def sleeps(monkeypatch):
    """Record the policy's backoff waits instead of waiting."""
    waited = []
    monkeypatch.setattr(module, "time", types.SimpleNamespace(sleep=waited.append))
    return waited


def test_chat_sends_the_sampling_settings_and_reads_text_and_logprobs():
    params = SamplingParams(max_new_tokens=20, temperature=0.7, top_p=0.9, seed=5)
    with served(lambda body: "Paris is the capital") as (server, policy):
        [done] = policy.chat([user("capital of France?")], params)
    body = server.requests[0]
    assert server.paths == ["/v1/chat/completions"]
    assert body["model"] == "m" and body["messages"] == user("capital of France?")
    assert (body["max_tokens"], body["temperature"], body["top_p"], body["seed"]) == (20, 0.7, 0.9, 5)
    assert body["logprobs"] is True and "stop" not in body
    assert done.text == "Paris is the capital" and done.finish_reason == "stop"
    assert done.logprobs == [token_logprob(i) for i in range(4)]
    assert done.token_ids == []  # this server sends no token ids unless asked


def test_order_is_kept_when_answers_arrive_in_reverse():
    n = 6

    def script(body):  # "q0" answers last, "q5" first
        question = body["messages"][-1]["content"]
        return Reply(question.upper(), delay=0.05 * (n - int(question[1:])))

    with served(script, concurrency=n) as (server, policy):
        done = policy.chat([user(f"q{i}") for i in range(n)], PARAMS)
    assert [c.text for c in done] == [f"Q{i}" for i in range(n)]
    assert server.max_in_flight > 1  # they really ran at the same time


def test_seeded_requests_of_one_call_get_their_own_seeds():
    with served() as (server, policy):
        policy.chat([user("same")] * 3, SamplingParams(seed=11))
    assert sorted(r["seed"] for r in server.requests) == sorted(request_seed(11, i) for i in range(3))
    assert request_seed(11, 0) == 11 and len({request_seed(11, i) for i in range(3)}) == 3


def test_concurrency_bounds_the_requests_in_flight():
    with served(lambda body: Reply("ok", delay=0.2), concurrency=3) as (server, policy):
        done = policy.chat([user(str(i)) for i in range(9)], PARAMS)
    assert [c.text for c in done] == ["ok"] * 9
    assert len(server.requests) == 9
    assert server.max_in_flight == 3


def test_server_errors_are_retried_with_exponential_backoff(sleeps):
    with served(lambda body: "fine", max_retries=3, backoff=0.5) as (server, policy):
        server.fail(Reply(status=500, message="boom"), Reply(status=503), Reply(status=502))
        [done] = policy.chat([user("x")], PARAMS)
    assert done.text == "fine"
    assert len(server.requests) == 4
    assert sleeps == [0.5, 1.0, 2.0]


def test_rate_limits_wait_at_least_retry_after(sleeps):
    with served(lambda body: "fine", backoff=0.5) as (server, policy):
        server.fail(Reply(status=429, message="slow down", headers={"Retry-After": "3"}))
        [done] = policy.chat([user("x")], PARAMS)
    assert done.text == "fine" and sleeps == [3.0]


def test_retry_after_reads_seconds_milliseconds_and_dates():
    assert retry_after(httpx.Headers({"retry-after-ms": "250"})) == 0.25
    assert retry_after(httpx.Headers({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"})) == 0.0  # past
    assert retry_after(httpx.Headers({"Retry-After": "soon"})) is None
    assert retry_after(httpx.Headers({})) is None


def test_exhausted_retries_raise_policy_error_naming_the_endpoint(sleeps):
    with served(max_retries=2) as (server, policy):
        server.fail(*[Reply(status=500, message="engine dead")] * 3)
        with pytest.raises(
            PolicyError, match=r"/v1/chat/completions failed after 3 attempt\(s\).*engine dead"
        ):
            policy.chat([user("x")], PARAMS)
    assert len(server.requests) == 3


def test_a_refused_request_is_not_retried(sleeps):
    with served() as (server, policy):
        server.fail(Reply(status=400, message="max_tokens is too large"))
        with pytest.raises(PolicyError, match=r"refused the request \(400\): max_tokens is too large"):
            policy.chat([user("x")], PARAMS)
    assert len(server.requests) == 1 and sleeps == []


def test_a_slow_answer_times_out_and_is_retried():
    with served(lambda body: "fast", timeout=0.3, max_retries=1, backoff=0) as (server, policy):
        server.fail(Reply("slow", delay=1.0))
        [done] = policy.chat([user("x")], PARAMS)
        assert done.text == "fast" and len(server.requests) == 2
        server.fail(Reply("slow", delay=1.0), Reply("slow", delay=1.0))
        with pytest.raises(PolicyError, match="timed out after 0.3s"):
            policy.chat([user("x")], PARAMS)


def test_an_unreachable_server_raises_policy_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # free, and nobody listens once the socket closes
    policy = OpenAIPolicy("m", base_url=f"http://127.0.0.1:{port}/v1", max_retries=0)
    with policy, pytest.raises(PolicyError, match="could not connect"):
        policy.chat([user("x")], PARAMS)


def test_the_stop_string_the_server_dropped_is_put_back():
    text = "<think>hm</think><search> capital </search> and more"
    params = SamplingParams(stop=("</search>", "</answer>"))
    with served(lambda body: text) as (server, policy):
        [done] = policy.chat([user("x")], params)
    assert server.requests[0]["stop"] == ["</search>", "</answer>"]
    assert done.text == "<think>hm</think><search> capital </search>"
    assert done.finish_reason == "stop"
    assert len(done.logprobs) == len(tokens_of(done.text))


def test_without_stop_reason_the_stop_string_is_found_in_the_tokens():
    params = SamplingParams(stop=("</search>", "</answer>"))
    with served(lambda body: "<answer> Oslo </answer> bye", report_stop_reason=False) as (server, policy):
        [done] = policy.chat([user("x")], params)
    assert done.text == "<answer> Oslo </answer>" and done.finish_reason == "stop"


def test_stop_strings_beyond_four_are_cut_locally():
    stop = ("<a>", "<b>", "<c>", "<d>", "</answer>", "never")
    params = SamplingParams(max_new_tokens=64, stop=stop)
    reply = "<answer> Oslo </answer> and then more words"
    with served(lambda body: reply, extra_body={"return_token_ids": True}) as (server, policy):
        [done] = policy.chat([user("x")], params)
    assert server.requests[0]["stop"] == ["<a>", "<b>", "<c>", "<d>"]
    assert done.text == "<answer> Oslo </answer>" and done.finish_reason == "stop"
    kept = tokens_of("<answer> Oslo </answer>")
    assert done.token_ids == [token_id(t) for t in kept]  # ids and log-probs cut to match the text
    assert done.logprobs == [token_logprob(i) for i in range(len(kept))]


def test_max_tokens_gives_finish_reason_length():
    with served(lambda body: "one two three four five") as (_, policy):
        [done] = policy.chat([user("x")], SamplingParams(max_new_tokens=2))
    assert done.text == "one two" and done.finish_reason == "length" and len(done.logprobs) == 2


def test_generate_posts_token_ids_to_completions_and_reads_token_ids():
    with served(extra_body={"return_tokens_as_token_ids": True}) as (server, policy):  # echoes "<n> tokens"
        done = policy.generate([[1, 2, 3], [4, 5]], PARAMS)
    assert server.paths == ["/v1/completions"] * 2
    assert sorted(r["prompt"] for r in server.requests) == [[1, 2, 3], [4, 5]]
    assert all(r["logprobs"] == 1 and r["return_tokens_as_token_ids"] for r in server.requests)
    assert [c.text for c in done] == ["3 tokens", "2 tokens"]
    assert done[0].token_ids == [token_id("3"), token_id(" tokens")]
    assert done[0].logprobs == [token_logprob(0), token_logprob(1)]
    with pytest.raises(TypeError, match="use chat"):
        policy.generate("hello", PARAMS)


def test_generate_explains_a_server_that_refuses_token_prompts():
    with served() as (server, policy):
        server.fail(Reply(status=400, message="prompt must be a string"))
        with pytest.raises(PolicyError, match="prompt must be a string.*may not accept prompts as token ids"):
            policy.generate([[1, 2]], PARAMS)


def test_api_key_is_sent_as_bearer_token(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    with OpenAIServer() as server:
        with OpenAIPolicy("m", base_url=server.url) as policy:
            policy.chat([user("x")], PARAMS)
        with OpenAIPolicy("m", base_url=server.url, api_key="sk-given") as policy:
            policy.chat([user("x")], PARAMS)
    assert [h["authorization"] for h in server.headers] == ["Bearer sk-from-env", "Bearer sk-given"]


def test_no_key_no_authorization_header(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with served() as (server, policy):
        policy.chat([user("x")], PARAMS)
    assert "authorization" not in server.headers[0]


def test_bad_settings_are_config_errors():
    with pytest.raises(ConfigError, match="concurrency >= 1"):
        OpenAIPolicy("m", concurrency=0)
    with pytest.raises(ConfigError, match="name the model"):
        OpenAIPolicy("")


def test_policy_agent_plays_an_episode_through_the_server():
    env = lambda: searchgym.make("searchgym/FictionalQA-BM25-v0", n_passages=300)  # noqa: E731
    task = env().unwrapped.tasks[0]

    def script(body):
        if len(body["messages"]) == 1:  # the question: search for it
            return f"<think>look it up</think><search> {task.question} </search> extra"
        assert "<information>" in body["messages"][-1]["content"]
        return f"<think>found</think><answer> {task.answers[0]} </answer>"

    with served(script) as (server, policy):
        assert not hasattr(policy, "tokenizer")  # PolicyAgent drives it with messages
        [episode] = run_episodes(env, lambda: PolicyAgent(policy, PARAMS), [task])
    assert [t.tool for t in episode.turns] == ["search", "answer"]
    assert episode.turns[0].action == f"<think>look it up</think><search> {task.question} </search>"
    assert "<information>" in episode.turns[0].observation
    assert episode.terminated and episode.em == 1.0 and episode.n_searches == 1
    assert episode.trajectory is None
    second = server.requests[1]["messages"]
    assert [m["role"] for m in second] == ["user", "assistant", "user"]
    assert second[1]["content"] == episode.turns[0].action
    assert server.requests[0]["stop"] == ["</search>", "</answer>"]
