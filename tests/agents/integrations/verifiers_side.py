"""verifiers' own eval on the searchgym taskset, against a scripted OpenAI-compatible server that
plays searchgym's scripted agents; run in a side venv by test_verifiers_env.py (`run_in`).

    python verifiers_side.py v1 '[{"name": "oracle", "agent": "oracle", "options": {}, "n": 200}]'
    python verifiers_side.py user SITE WORK    # a user's own envs (tests/user_env.py)

(verifiers 0.3's ``load_environment`` is played by verifiers03_side.py, which imports
`scripted_agents` and `FIGURES` from here.)

Each request names the agent as its model. The server finds the task from the conversation's first
user message (the env's first observation), replays the agent over the conversation's tool results
and answers with the agent's next action as an OpenAI ``tool_calls`` message. The last stdout line
is JSON: per agent, the figures ``searchgym eval`` reports (`summarize`), each reward component's
mean and the trace's total reward (as verifiers scored it) with the weights it used.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from statistics import fmean
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests/, for openai_server

from openai_server import OpenAIServer, Reply  # noqa: E402

from searchgym.agents import make_agent  # noqa: E402
from searchgym.agents.integrations.verifiers.shared import DEFAULT_ENV, env_tasks  # noqa: E402
from searchgym.agents.play.episode import Episode, summarize  # noqa: E402
from searchgym.agents.play.session import EnvSession, agent_reset_info  # noqa: E402
from searchgym.envs.tools import ToolCall  # noqa: E402
from searchgym.tasks.task import Task  # noqa: E402

FAULTS = [("search", {"query": ""}), ("search", {"q": "x"}), ("open", {"url": "x"})]
"""What the model ``faulty`` calls first: an empty query (the env's invalid action), an argument
the tool does not take (refused by MCP's schema), a tool the env lacks (refused by the harness)."""
FIGURES = ("n", "em", "f1", "cover_em", "searches", "turns", "invalid_rate", "truncated", "return")


def scripted_agents(runs: list[dict[str, Any]]) -> Any:
    """The server's script: the scripted agent named by the request's model, replayed over the
    conversation; the model ``faulty`` makes the mistakes of `FAULTS`, then searches until the
    turn limit ends the episode."""
    by_prompt: dict[str, tuple[Task, EnvSession]] = {}
    for run in runs:
        session = EnvSession(run.get("env", DEFAULT_ENV), **run["options"])
        for t in env_tasks(session, run["n"]):
            if by_prompt.setdefault(t.prompt, (t.task, session))[0] != t.task:
                raise SystemExit("two tasks share a prompt: the server could not tell them apart")

    def script(body: dict[str, Any]) -> Reply:
        messages = [m for m in body["messages"] if m["role"] != "system"]
        task, session = by_prompt[messages[0]["content"]]
        results = [m["content"] for m in messages if m["role"] == "tool"]
        if body["model"] == "faulty":
            name, arguments = (
                FAULTS[len(results)] if len(results) < len(FAULTS) else ("search", {"query": "x"})
            )
            return Reply(tool_calls=[(name, arguments)])
        agent = make_agent(body["model"])
        schemas = [tool.schema() for tool in session.tools]
        agent.reset(
            agent_reset_info({"task": task.to_dict(), "protocol": session.protocol.name, "tools": schemas})
        )
        for observation in [messages[0]["content"], *map(session.protocol.format_result, results)]:
            action = agent.act(observation)
        call = session.protocol.parse(action)
        if not isinstance(call, ToolCall):
            raise AssertionError(f"the scripted {body['model']} agent wrote an invalid action: {action!r}")
        return Reply(tool_calls=[(call.name, call.arguments)])

    return script


def start_v1(url: str, run: dict[str, Any], out: Path, **popen: Any) -> subprocess.Popen:
    """``vf-eval searchgym ...`` (verifiers 0.4) for one run (its ``env`` and the modules it
    ``imports`` where it names them), started with ``popen``'s ``cwd`` and ``env``."""
    imports = ["--env.taskset.imports", *run["imports"]] if run.get("imports") else []
    command = [
        str(Path(sys.executable).with_name("vf-eval")), "searchgym",
        "--env.taskset.env-id", run.get("env", DEFAULT_ENV),
        *imports,
        "--env.taskset.options", json.dumps(run["options"]),
        "--env.taskset.n", str(run["n"]),
        "--env.agent.runtime.type", "subprocess",
        "-m", run["agent"],
        "--client.base-url", url,
        "--output-dir", str(out),
        "--run.name", run["name"],
        "--max-concurrent", "16",
        "--no-push", "--no-rich",
    ]  # fmt: skip
    env = {**popen.pop("env", os.environ), "PRIME_API_KEY": "test"}
    return subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, **popen
    )


def traces_of(process: subprocess.Popen, run: dict[str, Any], out: Path) -> list[dict[str, Any]]:
    """The traces the run wrote, once it is over."""
    _, stderr = process.communicate(timeout=600)
    if process.returncode != 0:
        raise SystemExit(f"vf-eval failed ({process.returncode}):\n{stderr[-4000:]}")
    lines = (out / run["name"] / "traces.jsonl").read_text().splitlines()
    return [trace for line in lines for trace in json.loads(line)["traces"]]


def figures(traces: list[dict[str, Any]]) -> dict[str, Any]:
    errors = [t["errors"] for t in traces if t["errors"]]
    if errors:
        raise SystemExit(f"{len(errors)} rollouts failed, the first: {errors[0]}")
    episodes = [Episode.from_dict(t["info"]["searchgym_episode"]) for t in traces]
    names = list(traces[0]["rewards"])
    return {
        **{k: summarize(episodes)[k] for k in FIGURES},
        "components": {name: fmean(t["rewards"][name]["score"] for t in traces) for name in names},
        "weights": {name: traces[0]["rewards"][name]["weight"] for name in names},
        "reward": fmean(sum(r["score"] * r["weight"] for r in t["rewards"].values()) for t in traces),
        "metrics": {k: fmean(t["metrics"][k] for t in traces) for k in ("em", "f1", "searches")},
        "task_ids": [ep.task_id for ep in episodes],
    }


def client_environ(server: OpenAIServer) -> dict[str, str]:
    """The environment a docs page's commands run in: this venv's commands first on the PATH, and
    the scripted server as the OpenAI endpoint the page names, playing the oracle."""
    return {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        "OPENAI_BASE_URL": server.url,
        "OPENAI_API_KEY": "test",
        "MODEL": "oracle",
    }


def doc(bash_block: str, python_block: str) -> None:
    """Run the docs page's blocks: the vf-eval command against the scripted server (as the oracle,
    on its 20 dev tasks of the tool_calls protocol), then the Python example."""
    runs = [{"options": {"protocol": "tool_calls", "split": "dev"}, "n": 20}]
    with OpenAIServer(scripted_agents(runs)) as server, tempfile.TemporaryDirectory() as out:
        env = client_environ(server)
        done = subprocess.run(["bash", "-c", bash_block], cwd=out, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"the vf-eval block failed ({done.returncode}):\n{done.stderr[-4000:]}")
        lines = (Path(out) / "outputs" / "searchgym-eval" / "traces.jsonl").read_text().splitlines()
        traces = [trace for line in lines for trace in json.loads(line)["traces"]]
    printed = subprocess.run([sys.executable, "-c", python_block], capture_output=True, text=True)
    if printed.returncode != 0:
        raise SystemExit(f"the Python block failed:\n{printed.stderr[-4000:]}")
    print(json.dumps({"eval": figures(traces), "python": printed.stdout}))


def main(api: str, runs_json: str) -> None:
    """Play each run (``{"name", "agent", "options", "n"}``) at once; print their figures."""
    runs = json.loads(runs_json)
    if api != "v1":
        raise SystemExit(f"unknown api {api!r}")
    report: dict[str, Any] = {}
    with OpenAIServer(scripted_agents(runs)) as server, tempfile.TemporaryDirectory() as out:
        started = [(run, start_v1(server.url, run, Path(out))) for run in runs]
        for run, process in started:
            report[run["name"]] = figures(traces_of(process, run, Path(out)))
        faulty = [body["messages"] for body in server.requests if body["model"] == "faulty"]
        report["faulty_requests"] = faulty
    print(json.dumps(report))


def user(site: str, work: str) -> None:
    """vf-eval, run in ``work`` with ``site`` (where the plug-in package ``searchgym-mylab`` is
    installed) on its PYTHONPATH, plays the oracle on the plug-in's env named by id alone, and on
    the env of ``work``'s ``mylab_turing.py`` named with ``--env.taskset.imports``; then an id that
    nothing registers. Prints each run's figures and the last run's error."""
    from user_env import IMPORTED_ENV, IMPORTED_MODULE, PLUGIN_ENV

    sys.path[:0] = [site, work]  # this script's scripted server makes the same envs
    import mylab_turing  # noqa: F401  (registers IMPORTED_ENV; searchgym loads the plug-in by itself)

    oracle = {"agent": "oracle", "options": {}}
    runs = [
        {"name": "plugin", "env": PLUGIN_ENV, "n": 2, **oracle},
        {"name": "module", "env": IMPORTED_ENV, "imports": [IMPORTED_MODULE], "n": 1, **oracle},
    ]
    environ = {**os.environ, "PYTHONPATH": os.pathsep.join([site, os.environ.get("PYTHONPATH", "")])}
    report: dict[str, Any] = {}
    with OpenAIServer(scripted_agents(runs)) as server, tempfile.TemporaryDirectory() as out:
        for run in runs:
            process = start_v1(server.url, run, Path(out), cwd=work, env=environ)
            report[run["name"]] = figures(traces_of(process, run, Path(out)))
        unknown = {**runs[1], "name": "unknown", "env": "mylab/Nope-v0"}
        process = start_v1(server.url, unknown, Path(out), cwd=work, env=environ)
        report["unknown"] = {"stderr": process.communicate(timeout=600)[1], "returncode": process.returncode}
    print(json.dumps(report))


if __name__ == "__main__":
    modes = {"doc": doc, "user": user}
    modes[sys.argv[1]](*sys.argv[2:]) if sys.argv[1] in modes else main(*sys.argv[1:])
