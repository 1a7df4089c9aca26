"""`searchgym serve-env`: OpenEnv's client and the MCP SDK's client play a served env exactly as
`searchgym eval` plays it in process; sessions stay apart under load, a killed client frees its
session, and bad messages get an error that names them while the server keeps serving."""

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from websockets.sync.client import connect

from searchgym.agents import make_agent
from searchgym.agents.integrations.openenv.client import SearchgymEnvClient, play_episode
from searchgym.agents.integrations.openenv.messages import SearchgymAction
from searchgym.agents.integrations.openenv.server import create_env_app
from searchgym.agents.play.episode import Episode, summarize
from searchgym.agents.play.rollout import run_episodes, sample_tasks
from searchgym.agents.play.session import EnvSession
from searchgym.envs.protocols import make_protocol
from searchgym.envs.registry import make
from searchgym.envs.tools import Invalid, Tool
from searchgym.retrievers.server import ServerThread

ENV = "searchgym/FictionalQA-BM25-v0"
N_TASKS = 200  # the dev tasks `searchgym eval --n 200` plays


def native(protocol: str, agent: str) -> list[Episode]:
    """`searchgym eval --agent AGENT --n 200 -E protocol=PROTOCOL`'s episodes."""
    tasks = sample_tasks(make(ENV, protocol=protocol).unwrapped.tasks, N_TASKS, seed=0)
    return run_episodes(lambda: make(ENV, protocol=protocol), lambda: make_agent(agent), tasks, n_envs=4)


@pytest.fixture(scope="module", params=["tags", "tool_calls"])
def served(request):
    # the oracle reads the gold answers, which the server sends only when asked
    app = create_env_app(ENV, {"protocol": request.param}, max_sessions=64, reveal_answers=True)
    with ServerThread(app) as server:
        yield request.param, server


@pytest.mark.parametrize("agent", ["oracle", "heuristic"])
def test_openenv_client_gives_the_native_figures(served, agent):
    protocol, server = served
    expected = native(protocol, agent)
    with SearchgymEnvClient(base_url=server.url).sync() as env:
        got = [
            play_episode(env, make_agent(agent), task_id=ep.task_id, seed=i) for i, ep in enumerate(expected)
        ]
    assert [ep.to_dict() for ep in got] == [ep.to_dict() for ep in expected]
    assert summarize(got) == summarize(expected)


async def mcp_episode(http, url: str, agent, task_index: int, seed: int, protocol: str) -> Episode:
    """One episode of a scripted agent through the MCP SDK's client alone: the task comes from the
    prompt ``task``, each action is parsed into a tool call, the reward from the result."""
    url = f"{url}/mcp?task_index={task_index}&seed={seed}"
    async with (
        streamable_http_client(url, http_client=http) as (read, write, _),
        ClientSession(read, write) as mcp,
    ):
        await mcp.initialize()
        listed = await mcp.list_tools()
        tools = [
            Tool.from_schema({"function": {**t.model_dump(), "parameters": t.inputSchema}})
            for t in listed.tools
        ]
        observation = (await mcp.get_prompt("task")).messages[0].content.text
        env_protocol = make_protocol(protocol, tools)
        task = make(ENV, protocol=protocol).unwrapped.tasks[task_index]
        agent.reset({"task": task, "protocol": env_protocol})
        episode, done = Episode.of(task), False
        while not done:
            action = agent.act(observation)
            call = env_protocol.parse(action)
            assert not isinstance(call, Invalid), call
            result = await mcp.call_tool(call.name, call.arguments)
            assert not result.isError, result.content
            out = result.structuredContent
            observation, done, info = out["observation"], out["done"], out["info"]
            episode.record(action, observation, out["reward"], info["terminated"], info["truncated"], info)
        return episode


@pytest.mark.parametrize("agent", ["oracle", "heuristic"])
def test_mcp_sdk_client_gives_the_native_figures(served, agent):
    protocol, server = served
    expected = native(protocol, agent)
    index = {t.id: i for i, t in enumerate(make(ENV, protocol=protocol).unwrapped.tasks)}

    async def play_all():
        async with httpx.AsyncClient() as http:
            return [
                await mcp_episode(http, server.url, make_agent(agent), index[ep.task_id], i, protocol)
                for i, ep in enumerate(expected)
            ]

    got = asyncio.run(play_all())
    assert [ep.to_dict() for ep in got] == [ep.to_dict() for ep in expected]
    assert summarize(got) == summarize(expected)


def test_an_mcp_client_steps_the_session_a_websocket_client_reset(served):
    protocol, server = served
    with SearchgymEnvClient(base_url=server.url).sync() as env:
        first = env.reset(task_index=3)
        session_id = first.observation.metadata["session_id"]

        async def search():
            async with (
                streamable_http_client(f"{server.url}/mcp?session_id={session_id}") as (
                    read,
                    write,
                    _,
                ),
                ClientSession(read, write) as mcp,
            ):
                await mcp.initialize()
                return await mcp.call_tool("search", {"query": "founded"})

        result = asyncio.run(search())
        assert not result.isError and result.structuredContent["info"]["n_searches"] == 1
        state = env.state()
        assert state.n_searches == 1 and state.step_count == 1  # the WebSocket's own episode moved


def test_64_sessions_play_at_once_without_mixing():
    """64 concurrent sessions each play a whole episode of the task their seed draws; each
    trajectory equals the same seed played in process."""
    seeds = range(64)

    def in_process(seed):
        session = EnvSession(ENV)
        observation, _ = session.reset(seed=seed)
        agent = make_agent("heuristic")
        agent.reset(session.reset_info)
        while not session.done:
            observation = session.step(agent.act(observation)).observation
        return session.episode.to_dict()

    with ServerThread(create_env_app(ENV, max_sessions=64, reveal_answers=True)) as server:

        def remote(seed):
            with SearchgymEnvClient(base_url=server.url).sync() as env:
                return play_episode(env, make_agent("heuristic"), seed=seed).to_dict()

        with ThreadPoolExecutor(64) as pool:
            got = list(pool.map(remote, seeds))
    assert got == [in_process(seed) for seed in seeds]
    assert len({ep["task_id"] for ep in got}) > 32  # the seeds drew different tasks


KILLED_CLIENT = textwrap.dedent(
    """
    import json, sys
    from websockets.sync.client import connect
    ws = connect(sys.argv[1])
    for message in ({"type": "reset", "data": {"task_index": 0}},
                    {"type": "step", "data": {"tool": "search", "arguments": {"query": "founded"}}}):
        ws.send(json.dumps(message))
        assert json.loads(ws.recv())["type"] == "observation"
    print("mid-episode", flush=True)
    sys.stdin.read()
    """
)


def test_a_killed_client_frees_its_session_and_others_play_on():
    app = create_env_app(ENV, max_sessions=2)
    with ServerThread(app) as server, SearchgymEnvClient(base_url=server.url).sync() as other:
        other.reset(task_index=1)
        child = subprocess.Popen(
            [sys.executable, "-c", KILLED_CLIENT, server.url.replace("http", "ws") + "/ws"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert child.stdout.readline().strip() == "mid-episode"
        assert app.state.env_server.active_sessions == 2
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        deadline = time.monotonic() + 10
        while app.state.env_server.active_sessions > 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert app.state.env_server.active_sessions == 1
        assert (
            other.step(SearchgymAction(tool="search", arguments={"query": "x"})).observation.metadata["turn"]
            == 1
        )
        with SearchgymEnvClient(base_url=server.url).sync() as third:  # the freed slot is usable
            assert third.reset(task_index=2).done is False


def test_bad_messages_get_an_error_naming_them_and_the_server_keeps_serving():
    app = create_env_app(ENV, max_sessions=1, max_message_bytes=4096)
    with ServerThread(app) as server:
        ws_url = server.url.replace("http", "ws") + "/ws"
        with connect(ws_url) as ws:

            def send(message: str) -> dict:
                ws.send(message)
                return json.loads(ws.recv(timeout=10))

            assert "Invalid JSON" in send("{not json")["data"]["message"]
            reply = send(json.dumps({"type": "step", "data": {"text": "x", "tool": "search"}}))
            assert reply["type"] == "error" and "either" in json.dumps(reply["data"])
            reply = send(
                json.dumps({"type": "step", "data": {"tool": "search", "arguments": {"query": "x"}}})
            )
            assert "reset first" in reply["data"]["message"]
            send(json.dumps({"type": "reset", "data": {"task_index": 0}}))
            reply = send(json.dumps({"type": "step", "data": {"tool": "fly", "arguments": {}}}))
            assert "unknown tool 'fly'" in reply["data"]["message"]
            reply = send(
                json.dumps({"type": "step", "data": {"tool": "search", "arguments": {"query": "x"}}})
            )
            assert (
                reply["type"] == "observation" and reply["data"]["observation"]["metadata"]["n_searches"] == 1
            )
            with connect(ws_url) as second:  # one session at most: the second is refused
                assert json.loads(second.recv(timeout=10))["data"]["code"] == "CAPACITY_REACHED"
            ws.send(json.dumps({"type": "step", "data": {"text": "x" * 10_000}}))
            with pytest.raises(Exception, match="1009|message too big"):
                ws.recv(timeout=10)
        reply = httpx.post(f"{server.url}/reset", content=b"{" + b" " * 10_000 + b"}")
        assert reply.status_code == 413 and "4,096 bytes" in reply.json()["detail"]
        assert httpx.post(f"{server.url}/step", json={"action": {"tool": 3}}).status_code == 422
        assert httpx.post(f"{server.url}/step", json={"action": {"text": "x"}}).status_code == 409
        assert httpx.get(f"{server.url}/health").json() == {"status": "healthy"}
        initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
        mcp_headers = {"Accept": "application/json, text/event-stream"}
        reply = httpx.post(
            f"{server.url}/mcp", json=initialize, headers={**mcp_headers, "Host": "evil.example"}
        )
        assert reply.status_code == 400  # a page that rebinds its name to loopback cannot reach the tools
        reply = httpx.post(
            f"{server.url}/mcp", content=b"{bad", headers={**mcp_headers, "Content-Type": "application/json"}
        )
        assert reply.status_code == 400 and "Parse error" in reply.text
        with SearchgymEnvClient(base_url=server.url).sync() as env:  # the one slot was freed
            assert env.reset(task_index=0).observation.text.startswith("Answer the given question")


def test_the_schema_describes_searchgyms_messages():
    with ServerThread(create_env_app(ENV)) as server:
        schema = httpx.get(f"{server.url}/schema").json()
    assert {"text", "tool", "arguments"} <= set(schema["action"]["properties"])
    assert {"text", "reward_components", "reward", "done"} <= set(schema["observation"]["properties"])
    assert {"task_id", "total_reward", "n_searches"} <= set(schema["state"]["properties"])


def test_bad_server_options_fail_before_serving():
    with pytest.raises(ValueError, match="max_sessions must be at least 1"):
        create_env_app(ENV, max_sessions=0)
    with pytest.raises(ValueError, match="unknown action protocol 'xml'"):
        create_env_app(ENV, {"protocol": "xml"})


def test_an_idle_session_is_closed_after_the_timeout():
    app = create_env_app(ENV, idle_timeout_s=1.0)
    with ServerThread(app) as server, SearchgymEnvClient(base_url=server.url).sync() as env:
        env.reset(task_index=0)
        assert app.state.env_server.active_sessions == 1
        deadline = time.monotonic() + 15  # OpenEnv's reaper looks every 5 s at the least
        while app.state.env_server.active_sessions and time.monotonic() < deadline:
            time.sleep(0.1)
        assert app.state.env_server.active_sessions == 0


def test_the_openenv_rubric_is_the_envs_and_scores_each_step_as_the_env_does():
    """OpenEnv trainers read an env's ``rubric``: one child per reward term, named like it, whose
    weighted sum is the step's reward (costs and episode terms included)."""
    from searchgym.agents.integrations.openenv.environment import SearchgymEnvironment

    rewards = {"format": 0.2, "per_search": 0.05, "terms": {"evidence_recall": 0.5}}
    env = SearchgymEnvironment(ENV, {"rewards": rewards}, reveal_answers=True)
    names = [name for name, _ in env.rubric.named_rubrics()]
    terms = ("outcome", "format", "search_calls", "obs_tokens_1k", "evidence_recall")
    assert names == ["terms", *(f"terms.{name}" for name in terms)]
    assert env.rubric.terms["search_calls"].weight == -0.05
    task = env.reset(seed=0).metadata["task"]
    for tool, arguments in (
        ("search", {"query": task["question"]}),
        ("answer", {"answer": task["answers"][0]}),
    ):
        action = SearchgymAction(tool=tool, arguments=arguments)
        observation = env.step(action)
        assert env.rubric(action, observation) == pytest.approx(observation.reward)
    assert observation.done and env.rubric.terms["outcome"].last_score == 1.0
    assert env.rubric.terms["search_calls"].last_score == 0.0  # charged at the search, not the answer
