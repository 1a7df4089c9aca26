"""`searchgym serve-env` keeps to itself: foreign pages and names are refused on every route (the
WebSocket too), a reset sends no gold answer unless the operator asks, the session cap holds when
idle sessions are closed, and every malformed message gets a 4xx or an error naming it."""

import asyncio
import json
import socket
import time

import httpx
import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from searchgym.agents import make_agent
from searchgym.agents.integrations.openenv.client import SearchgymEnvClient, play_episode
from searchgym.agents.integrations.openenv.server import IDLE_CLOSE_CODE, create_env_app
from searchgym.errors import ConfigError
from searchgym.retrievers.server import ServerThread

ENV = "searchgym/FictionalQA-BM25-v0"
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest.fixture(scope="module")
def server():
    app = create_env_app(ENV, max_sessions=4, allowed_origins=["https://app.example"])
    with ServerThread(app) as running:
        yield running


def ws_url(server, host: str = "127.0.0.1") -> str:
    return f"ws://{host}:{server.url.rsplit(':', 1)[1]}/ws"


def handshake(server, host: str = "127.0.0.1", **headers: str):
    """A WebSocket to the server's /ws naming ``host`` in its Host header, with ``headers``."""
    port = int(server.url.rsplit(":", 1)[1])
    sock = socket.create_connection(("127.0.0.1", port))
    return connect(ws_url(server, host), sock=sock, additional_headers=headers, open_timeout=10)


def reset(ws, **data) -> dict:
    ws.send(json.dumps({"type": "reset", "data": data}))
    return json.loads(ws.recv(timeout=10))


def test_a_foreign_page_or_name_is_refused_on_every_route(server):
    with pytest.raises(InvalidStatus) as refused:
        handshake(server, Origin="http://evil.example")
    assert refused.value.response.status_code == 403
    assert "--allowed-origins http://evil.example" in json.loads(refused.value.response.body)["detail"]
    with pytest.raises(InvalidStatus) as refused:  # DNS rebinding: the page's own name, resolved to loopback
        handshake(server, "evil.example")
    assert refused.value.response.status_code == 403
    assert "--allowed-hosts evil.example" in json.loads(refused.value.response.body)["detail"]
    for method, route in (("GET", "/health"), ("POST", "/reset"), ("POST", "/mcp"), ("GET", "/schema")):
        reply = httpx.request(method, server.url + route, json={}, headers={"Origin": "http://evil.example"})
        assert reply.status_code == 403 and "--allowed-origins" in reply.json()["detail"], route
        reply = httpx.request(method, server.url + route, json={}, headers={"Host": "evil.example"})
        assert reply.status_code == 400 and "--allowed-hosts" in reply.json()["detail"], route
    # loopback pages and names, and the origins the operator allows, are served
    for host, origin in (("localhost", "http://localhost:3000"), ("127.0.0.1", "https://app.example")):
        with handshake(server, host, Origin=origin) as ws:
            assert reset(ws, task_index=0)["type"] == "observation"


def test_any_loopback_address_is_served_under_its_own_name():
    for host, name in (("127.0.0.2", "127.0.0.2"), ("::1", "[::1]")):
        with ServerThread(create_env_app(ENV, host=host), host=host) as server:
            port = server.url.rsplit(":", 1)[1]
            assert httpx.get(f"http://{name}:{port}/health").json() == {"status": "healthy"}
            with httpx.Client(headers=MCP_HEADERS) as http:  # the MCP route too
                mcp_initialize(http, f"http://{name}:{port}/mcp")
            with connect(f"ws://{name}:{port}/ws", open_timeout=10) as ws:
                assert reset(ws, task_index=0)["type"] == "observation"


def test_a_reset_sends_no_gold_answer_unless_the_operator_reveals_them(server):
    with connect(ws_url(server)) as ws:
        ws.send(json.dumps({"type": "reset", "data": {"task_index": 0}}))
        raw = ws.recv(timeout=10)
    task = json.loads(raw)["data"]["observation"]["metadata"]["task"]
    assert task == {
        "id": "fictional/dev/1hop/000000",
        "question": "What is the founding year of the company Treimyne Company?",
    }
    assert "1898" not in raw and "w0-001525" not in raw and "chain" not in raw  # answer, evidence, chain
    reply = httpx.post(f"{server.url}/reset", json={"task_index": 0})
    assert reply.json()["observation"]["metadata"]["task"] == task and "1898" not in reply.text
    with SearchgymEnvClient(base_url=server.url).sync() as env:
        episode = play_episode(env, make_agent("heuristic"), task_index=0)  # scored by the server
        assert episode.em == 1.0 and episode.answers == []
        with pytest.raises(ConfigError, match="only with --reveal-answers"):
            play_episode(env, make_agent("oracle"), task_index=0)
    with (
        ServerThread(create_env_app(ENV, reveal_answers=True)) as revealing,
        connect(ws_url(revealing)) as ws,
    ):
        task = reset(ws, task_index=0)["data"]["observation"]["metadata"]["task"]
        assert task["answers"] == ["1898"] and task["evidence"] == ["w0-001525"]


def test_an_idle_sessions_socket_is_closed_so_the_cap_holds():
    app = create_env_app(ENV, max_sessions=2, idle_timeout_s=1.0)
    with ServerThread(app) as server:
        idle = [connect(ws_url(server)) for _ in range(2)]
        for i, ws in enumerate(idle):
            assert reset(ws, task_index=i)["type"] == "observation"
        for ws in idle:  # OpenEnv's reaper looks every 5 s at the least
            with pytest.raises(ConnectionClosed) as closed:
                ws.recv(timeout=15)
            assert closed.value.rcvd.code == IDLE_CLOSE_CODE
            assert closed.value.rcvd.reason == "session closed after 1 s idle (--idle-timeout)"
        fresh = [connect(ws_url(server)) for _ in range(2)]
        for i, ws in enumerate(fresh):
            assert reset(ws, task_index=i)["type"] == "observation"
        with connect(ws_url(server)) as third:
            assert json.loads(third.recv(timeout=10))["data"]["code"] == "CAPACITY_REACHED"
        for ws in idle:
            with pytest.raises(ConnectionClosed):
                reset(ws, task_index=5)
        assert app.state.env_server.active_sessions == 2
        for ws in idle + fresh:
            ws.close()


def test_mcp_calls_keep_a_websocket_session_from_idling_out():
    app = create_env_app(ENV, idle_timeout_s=1.0)
    with ServerThread(app) as server, connect(ws_url(server)) as ws:
        session_id = reset(ws, task_index=0)["data"]["observation"]["metadata"]["session_id"]
        with httpx.Client(headers=MCP_HEADERS) as http:
            url = f"{server.url}/mcp?session_id={session_id}"
            mcp_id = mcp_initialize(http, url)
            deadline = time.monotonic() + 8  # past OpenEnv's reaper's first look, at 5 s
            while time.monotonic() < deadline:
                reply = mcp_request(http, url, mcp_id, "prompts/get", {"name": "task"})
                assert "Treimyne Company" in json.dumps(reply["result"])
                time.sleep(0.5)
        assert reset(ws, task_index=1)["type"] == "observation"


BAD_BODIES = {
    b'{"a": "\xff\xfe"}': "not UTF-8 text (byte 7 is 0xff)",
    b"[" * 100_000 + b"]" * 100_000: "nested deeper than 64 levels",
    b'{"action": ' + b"[" * 300 + b"]" * 300 + b"}": "nested deeper than 64 levels",
}


@pytest.mark.parametrize("route", ["/mcp", "/reset", "/step"])
def test_a_malformed_body_gets_a_400_naming_it(server, route):
    for body, problem in BAD_BODIES.items():
        reply = httpx.post(server.url + route, content=body, headers=MCP_HEADERS)
        assert reply.status_code == 400, (route, reply.text)
        assert problem in (reply.json()["error"]["message"] if route == "/mcp" else reply.json()["detail"])
    reply = httpx.post(f"{server.url}/reset", json={"task_index": 10**6})
    assert reply.status_code == 422 and "task_index must be in [0, 800)" in reply.json()["detail"]


WS_BAD = [
    (b"\x00\x01", "binary frames are not read: send JSON text frames"),
    ("[1, 2]", 'a message is a JSON object such as {"type": "reset", "data": {}}, not an array'),
    ("[" * 100_000 + "]" * 100_000, "the JSON is nested deeper than 64 levels"),
    ('{"type": "fly"}', "unknown message type 'fly': send one of reset, step, state, close"),
    ('{"type": "mcp", "data": {}}', "MCP is served at /mcp"),
    (
        '{"type": "reset", "data": {"task_idx": 1}}',
        "reset takes seed, episode_id, task_index, task_id, not 'task_idx'",
    ),
    ('{"type": "reset", "data": {"task_index": "3"}}', "reset's task_index must be an integer, got '3'"),
    ('{"type": "reset", "data": {"seed": -1}}', "reset's seed must be at least 0, got -1"),
]


def test_a_malformed_websocket_message_gets_an_error_naming_it_and_the_session_goes_on(server):
    with connect(ws_url(server)) as ws:
        for message, problem in WS_BAD:
            ws.send(message)
            reply = json.loads(ws.recv(timeout=10))
            assert reply["type"] == "error" and problem in reply["data"]["message"], (message[:40], reply)
        assert reset(ws, task_index=0)["type"] == "observation"


def mcp_initialize(http: httpx.Client, url: str) -> str:
    """Initialize an MCP session over plain JSON-RPC; its id."""
    params = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"},
    }
    reply = http.post(url, json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params})
    assert reply.status_code == 200, reply.text
    mcp_id = reply.headers["mcp-session-id"]
    headers = {"mcp-session-id": mcp_id}
    http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    return mcp_id


def mcp_request(http: httpx.Client, url: str, mcp_id: str, method: str, params: dict) -> dict:
    message = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    return http.post(url, json=message, headers={"mcp-session-id": mcp_id}).json()


def test_two_clients_sharing_an_mcp_session_play_its_one_episode_in_turn():
    """Both drive the one episode, their calls one step each; a request id already in flight in
    the session is refused (409), not left waiting for an answer the SDK gave the other."""
    app = create_env_app(ENV)
    with ServerThread(app) as server, httpx.Client(headers=MCP_HEADERS) as first:
        url = f"{server.url}/mcp?task_index=0"
        mcp_id = mcp_initialize(first, url)

        async def search(query: str, request_id: int) -> httpx.Response:
            async with httpx.AsyncClient(headers=MCP_HEADERS, timeout=30) as client:  # a client of its own
                arguments = {"name": "search", "arguments": {"query": query}}
                message = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": arguments}
                return await client.post(url, json=message, headers={"mcp-session-id": mcp_id})

        async def both() -> list[httpx.Response]:
            return await asyncio.gather(search("Treimyne Company", 1), search("founded", 2))

        replies = asyncio.run(both())  # the session's first calls: one episode is opened, not two
        infos = [reply.json()["result"]["structuredContent"]["info"] for reply in replies]
        assert sorted((info["turn"], info["n_searches"]) for info in infos) == [(1, 1), (2, 2)]
        prompt = mcp_request(first, url, mcp_id, "prompts/get", {"name": "task"})
        assert "Treimyne Company?" in json.dumps(prompt["result"])  # the episode of task 0
        [env] = app.state.env_server._sessions.values()

        async def same_id() -> tuple[httpx.Response, httpx.Response]:
            with env._lock:  # the first call's step waits: it stays in flight
                pending = asyncio.ensure_future(search("Treimyne", 7))
                await asyncio.sleep(1.0)
                second = await search("founded", 7)
            return await pending, second

        answered, refused = asyncio.run(same_id())
        assert (
            answered.status_code == 200
            and answered.json()["result"]["structuredContent"]["info"]["turn"] == 3
        )
        assert refused.status_code == 409 and refused.json()["id"] == 7
        assert "request id 7 is already in flight" in refused.json()["error"]["message"]
