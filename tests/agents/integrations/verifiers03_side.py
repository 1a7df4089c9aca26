"""verifiers 0.3's own loader and eval on searchgym's ``load_environment``, against the scripted
OpenAI-compatible server of `verifiers_side` (the scripted agents, answering with ``tool_calls``);
run in the side venv .venv-verifiers03 by test_verifiers_env.py (`run_in`).

    python verifiers03_side.py eval '[{"name": "oracle", "agent": "oracle", "options": {}, "n": 200}]'
    python verifiers03_side.py doc BASH_BLOCK PYTHON_BLOCK
    python verifiers03_side.py refused load_environment    # in the verifiers 0.4 venv
    python verifiers03_side.py user SITE WORK              # a user's own envs (tests/user_env.py)

``eval`` loads each run's env with ``verifiers.load_environment("searchgym", options=..., n=...)``
and plays it with ``env.evaluate`` (the model is the run's agent); the last stdout line is JSON:
per run, the figures ``searchgym eval`` reports (`summarize`) from the saved episodes, the mean of
each rubric function's score with the rubric's weights, the mean reward as verifiers scored it and
how the rollouts stopped; ``faulty_requests`` are the conversations the model ``faulty`` received.
The model ``silent`` replies without a tool call.
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

import verifiers as vf  # noqa: E402
from openai_server import OpenAIServer, Reply  # noqa: E402
from verifiers_side import FIGURES, client_environ, scripted_agents  # noqa: E402

from searchgym.agents.play.episode import Episode, summarize  # noqa: E402


def evaluate(url: str, run: dict[str, Any]) -> dict[str, Any]:
    """One run through verifiers 0.3's loader and ``Environment.evaluate``; its figures. The run's
    ``env`` and ``imports``, where it has them, are load_environment's arguments too."""
    named = {key: run[key] for key in ("env", "imports") if key in run}
    env = vf.load_environment("searchgym", options=run["options"], n=run["n"], **named)
    client = vf.ClientConfig(api_base_url=url, api_key_var="OPENAI_API_KEY")
    results = env.evaluate_sync(
        client, run["agent"], max_concurrent=16, state_columns=["searchgym_episode"], independent_scoring=True
    )
    outputs = results["outputs"]
    errors = [o["error"] for o in outputs if o.get("error")]
    if errors:
        raise SystemExit(f"{len(errors)} rollouts failed, the first: {errors[0]}")
    episodes = [Episode.from_dict(o["searchgym_episode"]) for o in outputs]
    weights = dict(zip(env.rubric._get_reward_func_names(), env.rubric._get_reward_weights()))
    return {
        **{k: summarize(episodes)[k] for k in FIGURES},
        "weights": weights,
        "components": {name: fmean(o["metrics"][name] for o in outputs) for name in weights},
        "reward": fmean(o["reward"] for o in outputs),
        "task_ids": [ep.task_id for ep in episodes],
        "stop_conditions": sorted({o["stop_condition"] for o in outputs}),
        "last_messages": [o["completion"][-1]["content"] for o in outputs if o["completion"]],
    }


def main(runs_json: str) -> None:
    runs = json.loads(runs_json)
    agents = scripted_agents(runs)
    os.environ.setdefault("OPENAI_API_KEY", "test")
    with OpenAIServer(
        lambda body: Reply("I give up.") if body["model"] == "silent" else agents(body)
    ) as server:
        report: dict[str, Any] = {run["name"]: evaluate(server.url, run) for run in runs}
        report["faulty_requests"] = [
            body["messages"] for body in server.requests if body["model"] == "faulty"
        ]
    print(json.dumps(report))


def doc(bash_block: str, python_block: str) -> None:
    """Run the docs page's blocks against the scripted server, as the oracle, on the 20 dev tasks of
    the tool_calls protocol they play: the vf-eval command (the figures of the results it saved),
    then the Python example (what it printed)."""
    runs = [{"options": {"protocol": "tool_calls", "split": "dev"}, "n": 20}]
    with OpenAIServer(scripted_agents(runs)) as server, tempfile.TemporaryDirectory() as out:
        env = client_environ(server)
        for block, command in (
            ("vf-eval", ["bash", "-c", bash_block]),
            ("Python", [sys.executable, "-c", python_block]),
        ):
            done = subprocess.run(command, cwd=out, env=env, capture_output=True, text=True)
            if done.returncode != 0:
                raise SystemExit(f"the {block} block failed ({done.returncode}):\n{done.stderr[-4000:]}")
        [results] = Path(out, "outputs", "evals", "searchgym--oracle").glob("*/results.jsonl")
        outputs = [json.loads(line) for line in results.read_text().splitlines()]
    episodes = [Episode.from_dict(o["searchgym_episode"]) for o in outputs]
    figures = {k: summarize(episodes)[k] for k in FIGURES}
    figures["reward"] = fmean(o["reward"] for o in outputs)
    figures["metrics"] = sorted(outputs[0]["metrics"])
    print(json.dumps({"eval": figures, "python": done.stdout}))


def refused(name: str) -> None:
    """``searchgym.NAME`` (called if it is a function): the error it raises in this venv, as JSON."""
    import searchgym

    try:
        attribute = getattr(searchgym, name)
        attribute() if callable(attribute) and not isinstance(attribute, type) else None
    except Exception as e:  # noqa: BLE001  (reported to the test, which checks it)
        print(json.dumps({"error": type(e).__name__, "message": str(e)}))
    else:
        raise SystemExit(f"searchgym.{name} raised nothing")


def user(site: str, work: str) -> None:
    """A user's process, run in ``work`` with ``site`` (where the plug-in package
    ``searchgym-mylab`` is installed) on its path: verifiers 0.3's loader makes the plug-in's env
    named by ``env`` alone and the env of ``work``'s ``mylab_turing.py`` named with ``imports``, and
    its eval plays the oracle on each; then ``env_id=`` (which verifiers' own signature takes) and
    an id nothing registers. Prints each run's figures and the errors."""
    from user_env import IMPORTED_ENV, IMPORTED_MODULE, PLUGIN_ENV

    sys.path.insert(0, site)
    os.chdir(work)
    os.environ.setdefault("OPENAI_API_KEY", "test")
    oracle = {"agent": "oracle", "options": {}}
    runs = [
        {"name": "plugin", "env": PLUGIN_ENV, "n": 2, **oracle},
        {"name": "module", "env": IMPORTED_ENV, "imports": [IMPORTED_MODULE], "n": 1, **oracle},
    ]
    # loaded once before the server starts, whose script makes the same envs
    vf.load_environment("searchgym", env=IMPORTED_ENV, imports=[IMPORTED_MODULE])
    with OpenAIServer(scripted_agents(runs)) as server:
        report: dict[str, Any] = {run["name"]: evaluate(server.url, run) for run in runs}
    for name, arguments in {
        "env_id": {"env_id": PLUGIN_ENV},
        "unknown": {"env": "mylab/Nope-v0"},
        "direct_env_id": None,
    }.items():
        try:
            if arguments is None:
                import searchgym

                searchgym.load_environment(env_id=PLUGIN_ENV)
            else:
                vf.load_environment("searchgym", **arguments)
        except Exception as e:  # noqa: BLE001  (reported to the test, which checks it)
            report[name] = f"{type(e).__name__}: {e}"
    print(json.dumps(report))


if __name__ == "__main__":
    {"eval": main, "doc": doc, "refused": refused, "user": user}[sys.argv[1]](*sys.argv[2:])
