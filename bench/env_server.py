"""What `searchgym serve-env` costs a trainer: step latency and episodes/s over each transport.

    python bench/env_server.py                 # 200 oracle episodes per transport, 16 concurrent clients
    python bench/env_server.py --episodes 20 --clients 4

The oracle's actions on dev tasks of searchgym/FictionalQA-BM25-v0 (tags protocol) are played:

- in process, through `EnvSession` (no transport: the reference of every ratio);
- over OpenEnv's WebSocket (`SearchgymEnvClient`), to `searchgym serve-env` in its own process,
  by one client, then by ``--clients`` clients at once;
- over HTTP, as MCP tool calls (the MCP SDK's streamable-HTTP client), one MCP session an episode;
- the peer: GEM's search env (PyPI ``gem-llm``: ``QaEnv`` on the same questions under its
  ``ToolEnvWrapper`` with its Search-R1 ``SearchTool``) in process, whose searches go to a
  retrieval server (`searchgym serve`, Search-R1's ``POST /retrieve``, over the same BM25 index, in
  its own process), as GEM's search envs are run.

Prints, per transport, the median and p99 step latency and episodes/s, and each as a ratio of
searchgym in process.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import httpx
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from searchgym.agents import make_agent
from searchgym.agents.integrations.openenv.client import SearchgymEnvClient
from searchgym.agents.integrations.openenv.messages import SearchgymAction
from searchgym.agents.play.rollout import run_episodes, sample_tasks
from searchgym.agents.play.session import EnvSession
from searchgym.envs.protocols import TagsProtocol
from searchgym.envs.registry import make
from searchgym.envs.tools import ToolCall

ENV = "searchgym/FictionalQA-BM25-v0"
Script = tuple[int, list[str]]  # a task's index in the env's tasks and the oracle's actions


def oracle_scripts(n: int) -> list[Script]:
    """The oracle's actions on ``n`` dev tasks (as `searchgym eval --n N` picks them)."""
    tasks = make(ENV).unwrapped.tasks
    picked = sample_tasks(tasks, n, seed=0)
    episodes = run_episodes(lambda: make(ENV), lambda: make_agent("oracle"), picked)
    index = {t.id: i for i, t in enumerate(tasks)}
    return [(index[ep.task_id], [turn.action for turn in ep.turns]) for ep in episodes]


def timed(
    play: Callable[[Script], list[float]], scripts: Sequence[Script], clients: int = 1, warm: bool = True
) -> dict:
    """Play every script (``clients`` at a time), after one untimed episode (``warm``: the first
    search of a process compiles BM25's kernel); step latencies and episodes/s."""
    if warm:
        play(scripts[0])
    start = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        latencies = [t for steps in pool.map(play, scripts) for t in steps]
    elapsed = time.perf_counter() - start
    latencies.sort()
    return {
        "p50_ms": 1000 * statistics.median(latencies),
        "p99_ms": 1000 * latencies[int(0.99 * (len(latencies) - 1))],
        "episodes_s": len(scripts) / elapsed,
        "steps": len(latencies),
    }


def in_process(script: Script) -> list[float]:
    session = EnvSession(ENV)
    session.reset(task_index=script[0])
    times = []
    for action in script[1]:
        start = time.perf_counter()
        session.step(action)
        times.append(time.perf_counter() - start)
    return times


def websocket(url: str) -> Callable[[Script], list[float]]:
    """Each worker thread keeps one connection (one server session) and resets it per episode,
    as a trainer's rollout worker does."""
    local = threading.local()

    def play(script: Script) -> list[float]:
        if not hasattr(local, "env"):
            local.env = SearchgymEnvClient(base_url=url).sync()
            local.env.connect()
            clients.append(local.env)
        local.env.reset(task_index=script[0])
        times = []
        for action in script[1]:
            start = time.perf_counter()
            local.env.step(SearchgymAction(text=action))
            times.append(time.perf_counter() - start)
        return times

    clients: list = []
    play.close = lambda: [c.close() for c in clients]  # type: ignore[attr-defined]
    return play


def mcp_http(url: str) -> Callable[[Script], list[float]]:
    protocol = TagsProtocol()

    async def episode(script: Script) -> list[float]:
        times = []
        async with (
            httpx.AsyncClient() as http,
            streamable_http_client(f"{url}/mcp?task_index={script[0]}", http_client=http) as (read, write, _),
            ClientSession(read, write) as mcp,
        ):
            await mcp.initialize()
            for action in script[1]:
                call = protocol.parse(action)
                assert isinstance(call, ToolCall), call
                start = time.perf_counter()
                result = await mcp.call_tool(call.name, call.arguments)
                times.append(time.perf_counter() - start)
                assert not result.isError, result.content
        return times

    return lambda script: asyncio.run(episode(script))


def gem_peer(retrieve_url: str, scripts: Sequence[Script]) -> Callable[[Script], list[float]]:
    """GEM's QaEnv over the same questions, with its SearchTool against ``retrieve_url``."""
    from datasets import Dataset
    from gem.envs.qa_env import QaEnv
    from gem.tools.search_tool import SearchTool
    from gem.tools.tool_env_wrapper import ToolEnvWrapper

    tasks = make(ENV).unwrapped.tasks
    actions = {tasks[i].question: script for i, script in scripts}  # GEM shuffles its questions
    rows = [{"question": tasks[i].question, "answer": list(tasks[i].answers)} for i, _ in scripts]
    qa = QaEnv(dataset=Dataset.from_list(rows), question_key="question", answer_key="answer")
    env = ToolEnvWrapper(
        qa, tools=[SearchTool(search_url=f"{retrieve_url}/retrieve", topk=3)], max_tool_uses=8
    )

    def play(_: Script) -> list[float]:
        """The next episode GEM serves, played with the oracle's actions for its question."""
        observation, _ = env.reset()
        question = next(q for q in actions if q in observation)
        times = []
        for action in actions.pop(question):
            start = time.perf_counter()
            env.step(action)
            times.append(time.perf_counter() - start)
        return times

    return play


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serving(args: list[str], port: int):
    """A `searchgym` server command in its own process, until its /health answers."""
    searchgym = Path(sys.executable).parent / "searchgym"  # this venv's command
    process = subprocess.Popen([str(searchgym), *args, "--port", str(port)], stdout=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"searchgym {args[0]} did not start")
            time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--episodes", type=int, default=200, help="oracle episodes per transport")
    parser.add_argument(
        "--clients", type=int, default=16, help="concurrent WebSocket clients in the load run"
    )
    args = parser.parse_args()

    scripts = oracle_scripts(args.episodes)
    results = {"searchgym in process": timed(in_process, scripts)}
    with serving(
        ["serve-env", ENV, "-E", "protocol=tags", "--max-sessions", str(args.clients + 2)], free_port()
    ) as url:
        for clients in (1, args.clients):
            play = websocket(url)
            results[f"searchgym WebSocket, {clients} client(s)"] = timed(play, scripts, clients)
            play.close()
        results["searchgym MCP over HTTP, 1 client"] = timed(mcp_http(url), scripts)
    with tempfile.TemporaryDirectory() as index:
        make(ENV).unwrapped.retriever.save(index)
        with serving(["serve", "--index", index], free_port()) as retrieve_url:
            httpx.post(f"{retrieve_url}/retrieve", json={"queries": ["warm up"], "topk": 3})
            results["GEM QaEnv+SearchTool (peer)"] = timed(
                gem_peer(retrieve_url, scripts), scripts, warm=False
            )

    base = results["searchgym in process"]
    print(f"{len(scripts)} oracle episodes of {ENV} per row ({base['steps']} steps)")
    print(f"{'transport':<36} {'p50 ms':>8} {'p99 ms':>8} {'episodes/s':>11} {'x p50':>7} {'x ep/s':>7}")
    for name, r in results.items():
        print(
            f"{name:<36} {r['p50_ms']:8.2f} {r['p99_ms']:8.2f} {r['episodes_s']:11.1f} "
            f"{r['p50_ms'] / base['p50_ms']:7.1f} {r['episodes_s'] / base['episodes_s']:7.3f}"
        )


if __name__ == "__main__":
    main()
