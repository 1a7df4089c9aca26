"""``searchgym eval``: play agents on an environment and report their metrics."""

from __future__ import annotations

import argparse
import functools
import json
import math
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from searchgym.agents import make_agent, run_episodes, save_episodes, summarize, summarize_by
from searchgym.agents.play.episode import error_warning
from searchgym.agents.play.failures import against_oracle, decisions, failure_card, failure_kind, format_card
from searchgym.agents.play.rollout import episode_progress, sample_tasks
from searchgym.agents.policies import models
from searchgym.agents.policies.base import SamplingParams
from searchgym.agents.registry import is_policy_agent, load_policy
from searchgym.commands.common import (
    add_env_args,
    bounded_int,
    check_agents,
    finite,
    generator_kwargs,
)
from searchgym.envs.contract import check_trainable_env
from searchgym.envs.registry import DEFAULT_ENV, make
from searchgym.errors import SearchGymError
from searchgym.files import check_writable_dir, file_name
from searchgym.plots import plot_metric_by_group
from searchgym.registry import check_env_id
from searchgym.retrievers.simulated import WritingProgress
from searchgym.tasks.task import Task

PROGRAM_POLICY = "cpu:smollm2-135m-instruct"
_COLUMNS = [
    ("n", "n", "{:d}"),
    ("em", "EM", "{:.3f}"),
    (("em_low", "em_high"), "EM 95% CI", "{:.2f}-{:.2f}"),
    ("f1", "F1", "{:.3f}"),
    ("cover_em", "cover-EM", "{:.3f}"),
    ("searches", "searches", "{:.2f}"),
    ("turns", "turns", "{:.2f}"),
    ("invalid_rate", "invalid", "{:.3f}"),
    ("errors", "errors", "{:.3f}"),
    ("evidence_recall", "ev.recall", "{:.3f}"),
]


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("eval", help="run agents on an environment and report metrics")
    p.add_argument("--env", default=DEFAULT_ENV, help=f"environment id (default {DEFAULT_ENV})")
    add_env_args(
        p,
        "keyword argument for the env, value read as YAML (e.g. -E split=test -E hops=2, or "
        "-E task_set=questions.jsonl: your own questions, see docs/tasks.md)",
    )
    p.add_argument(
        "--agent",
        default=None,
        help="agent name, or several separated by commas (default: all scripted agents); with --program, "
        f"the one policy its model calls go to (default {PROGRAM_POLICY})",
    )
    p.add_argument(
        "--program",
        default=None,
        metavar="MODULE:FUNCTION",
        help="your own agent program (or file.py:function), played through a token-recording gateway in "
        "front of --agent's policy: run(question, client, tools) (see docs/programs.md)",
    )
    p.add_argument(
        "--time-limit",
        type=float,
        default=300.0,
        help="--program: seconds of the program's own time one episode may take before it ends with an "
        "error: wall-clock time less the time its requests wait for the model (queued for a shared "
        "batch or being generated); 10 times as long in wall-clock time, waits included, ends it "
        "anyway (default 300)",
    )
    p.add_argument("--n", type=int, default=100, help="number of tasks, sampled without replacement")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--n-envs",
        type=bounded_int(1),
        default=None,
        help="env-agent pairs played side by side (default: 32 for a language-model agent, whose turns "
        "are one batched generation, 4 otherwise)",
    )
    p.add_argument(
        "--temperature", type=float, default=0.0, help="language-model agents: 0 is greedy (default)"
    )
    p.add_argument("--max-new-tokens", type=int, default=256, help="language-model agents: per turn")
    p.add_argument(
        "--simulator",
        default=None,
        metavar="BACKEND:MODEL",
        help="the model that plays the search engine, for envs that simulate one (e.g. "
        "searchgym/FictionalQA-Simulated-v0): named as for --agent, e.g. hf:smollm2-135m-instruct (the "
        "same name and --seed as an agent share its loaded model); a noise curriculum stays at step 0",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="output directory (default runs/eval/ENV/YYYYmmdd-HHMMSS, a new one per run)",
    )
    p.add_argument(
        "--closed-book",
        action="store_true",
        help="also play each agent with no search tool (env option closed_book) and add AdaSearch's decision "
        "metric to its card: did it skip searching exactly where its closed-book answer was right?",
    )
    p.add_argument("--json", action="store_true", help="print the metrics as one JSON object")
    p.add_argument(
        "--no-progress",
        action="store_true",
        help="hide the progress bars (episodes, a simulator's writing, a first run's model conversion)",
    )
    p.set_defaults(run=run)


def _convert_models(names: list[str], *, show_progress: bool) -> None:
    """Convert the offline models (such as the default SmolLM2) that the agents ``names`` load,
    before anything loads them, so that a first run shows the conversion's progress (it takes
    tens of seconds) unless told not to. ``openai:`` names a server's model, not loaded here."""
    for name in names:
        backend, _, model = name.partition(":")
        if is_policy_agent(name) and backend != "openai" and model.lower() in models.ALIASES:
            models.resolve_model(model, show_progress=show_progress)


def run(args: argparse.Namespace) -> int:
    if args.n < 1:
        raise SearchGymError(f"--n must be at least 1, got {args.n}")
    check_env_id(args.env)
    default_out = Path("runs") / "eval" / args.env.replace("/", "_") / time.strftime("%Y%m%d-%H%M%S")
    out = check_writable_dir(args.out or default_out, "--out")
    env_kwargs = dict(args.env_arg)
    default_agents = PROGRAM_POLICY if args.program else "oracle,heuristic,random"
    agent_names = [a.strip() for a in (args.agent or default_agents).split(",") if a.strip()]
    if args.program and (len(agent_names) != 1 or not is_policy_agent(agent_names[0])):
        raise SearchGymError(
            "--program sends its model calls to one policy: give --agent BACKEND:MODEL "
            f"(e.g. {PROGRAM_POLICY}), got {args.agent!r}"
        )
    program = None
    if args.program:
        from searchgym.agents.play.programs import load_program  # lazy: see play_program

        program = load_program(args.program)
    params = SamplingParams(max_new_tokens=args.max_new_tokens, temperature=args.temperature)
    _convert_models([*agent_names, *filter(None, [args.simulator])], show_progress=not args.no_progress)
    check_agents(agent_names, args.seed, params)  # fail on a typo before any work
    generator = generator_kwargs(args.env, args.simulator, args.seed)
    if generator and not args.no_progress:  # a simulated search's minutes show under the episodes
        generator["generator"] = WritingProgress(generator["generator"])
    make_kwargs = {**env_kwargs, **generator}
    probe = make(args.env, **make_kwargs)
    all_tasks = check_trainable_env(probe)
    probe.close()
    tasks = sample_tasks(all_tasks, args.n, args.seed)
    n = len(tasks)
    played = describe_tasks(all_tasks, tasks)

    results: dict[str, dict[str, Any]] = {}
    warnings: dict[str, str | None] = {}
    episodes_of: dict[str, list] = {}
    for name in agent_names:
        n_envs = args.n_envs or (32 if is_policy_agent(name) else 4)
        with episode_progress(n, f"{name:>10}", disable=args.no_progress) as callbacks:
            if program is not None:
                envs = [make(args.env, **make_kwargs) for _ in range(min(n_envs, n))]
                episodes = play_program(program, name, envs, tasks, params, args, callbacks["on_episode"])
                name = args.program
            else:
                episodes = run_episodes(
                    lambda: make(args.env, **make_kwargs),
                    functools.partial(make_agent, name, seed=args.seed, params=params),
                    tasks,
                    n_envs=n_envs,
                    seed=args.seed,
                    **callbacks,
                )
        for episode in episodes:
            episode.failure = failure_kind(episode)
        save_episodes(episodes, out / f"{file_name(name)}.jsonl")
        episodes_of[name] = episodes
        failures = failure_card(episodes, args.seed)
        if args.closed_book:
            closed = run_episodes(
                lambda: make(args.env, **make_kwargs, closed_book=True),
                functools.partial(make_agent, name, seed=args.seed, params=params),
                tasks,
                n_envs=n_envs,
                seed=args.seed,
            )
            save_episodes(closed, out / f"{file_name(name)}-closed-book.jsonl")
            failures["decisions"] = decisions(episodes, closed)
        results[name] = {
            "all": summarize(episodes),
            "by_hops": summarize_by(episodes, "hops"),
            "failures": failures,
        }
        warnings[name] = error_warning([ep.error for ep in episodes])

    # the oracle's queries on the same tasks and retriever, where the tasks name their evidence
    # (not where a language model writes the search results: those are not the same); its own
    # episodes where it played among the agents
    if any(t.evidence for t in tasks) and not generator:
        oracle = episodes_of.get("oracle") or run_episodes(
            lambda: make(args.env, **make_kwargs), functools.partial(make_agent, "oracle"), tasks, n_envs=4
        )
        for name, episodes in episodes_of.items():
            results[name]["failures"] |= against_oracle(episodes, oracle)
    report = {
        "env": args.env,
        "env_kwargs": env_kwargs,
        "tasks": played,
        "n": n,
        "seed": args.seed,
        "agents": results,
        "warnings": {name: line for name, line in warnings.items() if line},
    }
    if args.simulator:
        report = {**report, "simulator": args.simulator}
    (out / "metrics.json").write_text(json.dumps(finite(report), indent=2) + "\n")
    by_group = {name: {"all": r["all"], **r["by_hops"]} for name, r in results.items()}
    plot = plot_metric_by_group(by_group, out / "em.png", title=f"{args.env} · {n} tasks")
    if args.json:
        print(json.dumps(finite(report)))
    else:
        simulated = f"simulator {args.simulator}" if args.simulator else ""
        print("  ".join(filter(None, [args.env, str(env_kwargs or ""), simulated])))
        print(f"{played}  seed {args.seed}")
        print(format_table(results))
        for name, r in results.items():
            print(format_card(name, r["failures"]))
        for name, line in warnings.items():
            if line:
                print(f"{name}: {line}")
        print(f"trajectories, metrics.json and {plot.name} in {out}")
    return 0


def play_program(program, agent: str, envs, tasks, params, args, on_episode) -> list:
    """Episodes of ``program`` through a gateway in front of ``agent``'s policy."""
    # lazy: the openai client and the gateway's server, which every CLI start would import (1 s)
    from searchgym.agents.gateway.server import Gateway
    from searchgym.agents.play.programs import ProgramPlayer

    backend, _, model = agent.partition(":")
    gateway = Gateway(load_policy(backend, model, args.seed), params)
    with gateway:
        episodes = ProgramPlayer(program, gateway, time_limit_s=args.time_limit).play(
            envs, tasks, params, args.seed, on_episode
        )
    for env in envs:
        env.close()
    return episodes


def describe_tasks(all_tasks: Sequence[Task], tasks: Sequence[Task]) -> str:
    """What an evaluation plays: the env's task set (its name says the split, where it has one),
    how many of its tasks, and how many of each hop count.

    >>> from searchgym.tasks.task import Task, TaskSet
    >>> tasks = [Task(str(i), "q", ("a",), metadata={"hops": 1 + i % 2}) for i in range(6)]
    >>> pool = TaskSet("fictional/dev", tasks)
    >>> describe_tasks(pool, pool[:3])
    'tasks: 3 of the 6 of fictional/dev; hops 1 ×2, 2 ×1'
    """
    name = getattr(all_tasks, "name", None)
    source = f"the {len(all_tasks)} of {name}" if name else f"the env's {len(all_tasks)}"
    hops = Counter(t.metadata["hops"] for t in tasks if "hops" in t.metadata)
    by_hops = "; hops " + ", ".join(f"{h} ×{hops[h]}" for h in sorted(hops)) if hops else ""
    return f"tasks: {len(tasks)} of {source}{by_hops}"


def format_table(results: dict[str, dict[str, Any]]) -> str:
    """One row per agent (all tasks), then one per agent and hop count."""
    header = ["agent", "hops"] + [label for _, label, _ in _COLUMNS]
    rows = []
    for name, r in results.items():
        groups = [("all", r["all"])] + [(str(h), m) for h, m in r["by_hops"].items()]
        for group, metrics in groups:
            rows.append([name, group] + [_fmt(fmt, key, metrics) for key, _, fmt in _COLUMNS])
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    lines = ["  ".join(str(x).rjust(w) for x, w in zip(line, widths)) for line in [header, *rows]]
    return "\n".join(lines)


def _fmt(fmt: str, key: str | tuple[str, ...], metrics: dict[str, Any]) -> str:
    values = [metrics[k] for k in ((key,) if isinstance(key, str) else key)]
    return "-" if any(isinstance(v, float) and math.isnan(v) for v in values) else fmt.format(*values)
