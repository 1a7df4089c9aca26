"""The one command-line entry point:
``searchgym list | eval | train | sweep | index build | serve | plot``."""

from __future__ import annotations

import argparse
import functools
import inspect
import json
import math
import os
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from searchgym.errors import SearchGymError
from searchgym.retrievers.index import KINDS

DEFAULT_ENV = "searchgym/FictionalQA-BM25-v0"
_COLUMNS = [
    ("n", "n", "{:d}"),
    ("em", "EM", "{:.3f}"),
    ("f1", "F1", "{:.3f}"),
    ("cover_em", "cover-EM", "{:.3f}"),
    ("searches", "searches", "{:.2f}"),
    ("turns", "turns", "{:.2f}"),
    ("invalid_rate", "invalid", "{:.3f}"),
    ("evidence_recall", "ev.recall", "{:.3f}"),
]


def _key_value(text: str) -> tuple[str, Any]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, yaml.safe_load(value)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="searchgym", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("list", help="list registered environment ids")
    p.add_argument("--all", action="store_true", help="include other namespaces than searchgym/")

    p = sub.add_parser("eval", help="run agents on an environment and report metrics")
    p.add_argument("--env", default=DEFAULT_ENV, help=f"environment id (default {DEFAULT_ENV})")
    p.add_argument(
        "--env-arg",
        "-E",
        action="append",
        type=_key_value,
        default=[],
        metavar="KEY=VALUE",
        help="keyword argument for the env, value read as YAML (e.g. -E split=test -E hops=2)",
    )
    p.add_argument(
        "--agent",
        default="oracle,heuristic,random",
        help="agent name, or several separated by commas (default: all scripted agents)",
    )
    p.add_argument("--n", type=int, default=100, help="number of tasks, sampled without replacement")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--n-envs", type=int, default=4, help="env-agent pairs played side by side")
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
    p.add_argument("--out", type=Path, default=None, help="output directory (default runs/eval/ENV)")
    p.add_argument("--json", action="store_true", help="print the metrics as one JSON object")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")

    p = sub.add_parser("index", help="build search indexes")
    build = p.add_subparsers(dest="index_command", required=True).add_parser(
        "build", help="build an index from a JSONL corpus and save it"
    )
    build.add_argument(
        "--corpus", type=Path, required=True, help='JSONL: {"id","title","text"} or {"id","contents"}'
    )
    build.add_argument("--kind", choices=sorted(KINDS), default="bm25")
    build.add_argument("--out", type=Path, required=True, help="index directory to write")
    build.add_argument("--encoder", default=None, help="dense: model name or path (default all-MiniLM-L6-v2)")
    build.add_argument("--index", choices=["flat", "hnsw", "ivfpq"], default=None, help="dense: FAISS index")
    build.add_argument("--batch-size", type=int, default=None, help="dense: passages per encoder batch")
    build.add_argument(
        "--shard-size", type=int, default=None, help="dense: passages per embedding shard (default 100,000)"
    )
    build.add_argument(
        "--keep-embeddings", action="store_true", default=None, help="dense: keep OUT/embeddings"
    )
    build.add_argument("--no-progress", action="store_true", help="hide progress bars")

    p = sub.add_parser("serve", help="serve an index over HTTP (Search-R1's POST /retrieve)")
    p.add_argument("--index", type=Path, required=True, help="directory of a saved index")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default loopback only)")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--topk", type=int, default=3, help="k when a request gives none")
    p.add_argument("--max-batch", type=int, default=64, help="most queries per batched search")
    p.add_argument("--batch-wait-ms", type=float, default=2.0, help="how long to gather a batch")

    p = sub.add_parser("train", help="train a policy with GRPO on an environment (see configs/)")
    p.add_argument("--config", type=Path, default=None, help="YAML config (keys of GRPOConfig)")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config key, value read as YAML (e.g. --set steps=20 --set env_kwargs={hops:[2]})",
    )
    p.add_argument("--run-dir", default=None, help="where checkpoints, metrics and plots go")
    p.add_argument("--resume", action="store_true", help="continue from the newest checkpoint in the run dir")
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")

    p = sub.add_parser(
        "sweep",
        help="accuracy against search cost over several cost weights, and the Pareto front (pareto.png)",
        description="Evaluate agents once and score them at every cost weight (reward at λ = reward at 0 "
        "- λ x searches), or with --config train one GRPO policy per weight and evaluate those. Writes "
        "sweep.json and pareto.png.",
    )
    p.add_argument("--weights", required=True, help="cost weights λ per search, comma separated: 0,0.05,0.1")
    p.add_argument("--env", default=None, help="environment id (default searchgym/FictionalQA-Planner-v0)")
    p.add_argument(
        "--env-arg",
        "-E",
        action="append",
        type=_key_value,
        default=[],
        metavar="KEY=VALUE",
        help="as in eval",
    )
    p.add_argument(
        "--agents",
        default=None,
        help="agents to evaluate, separated by commas (default: planner-0..4, planner-question, oracle)",
    )
    p.add_argument(
        "--generator",
        default=None,
        metavar="BACKEND:MODEL",
        help="the frozen generator of envs that take one (the planner env), named as for --agent "
        "(default: the env's own, the extractive reader)",
    )
    p.add_argument("--config", type=Path, default=None, help="train mode: a GRPO config, one run per weight")
    p.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="train mode: override a config key"
    )
    p.add_argument("--n", type=int, default=100, help="tasks each agent or trained policy is evaluated on")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--n-envs", type=int, default=4, help="env-agent pairs played side by side")
    p.add_argument(
        "--out", type=Path, default=None, help="output directory (default runs/sweep; train: the run_dir)"
    )
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")

    p = sub.add_parser("plot", help="draw a training run's curves from its metrics.jsonl")
    p.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="the --run-dir of a training run")
    p.add_argument("--out", type=Path, default=None, help="where the PNGs go (default RUN_DIR/plots)")
    p.add_argument("--window", type=int, default=None, help="points per moving average (default n/10)")
    return parser


def cmd_list(args: argparse.Namespace) -> int:
    from searchgym.envs.registry import list_ids

    print("\n".join(list_ids(None if args.all else "searchgym")))
    return 0


def cmd_index(args: argparse.Namespace) -> int:
    import time

    from searchgym.retrievers.index import build_index

    dense_only = {
        "encoder": args.encoder,
        "index": args.index,
        "batch_size": args.batch_size,
        "shard_size": args.shard_size,
        "keep_embeddings": args.keep_embeddings,
    }
    given = {key: value for key, value in dense_only.items() if value is not None}
    if given and args.kind != "dense":
        raise SearchGymError(
            f"--{', --'.join(k.replace('_', '-') for k in given)} only apply to --kind dense"
        )
    start = time.perf_counter()
    built = build_index(args.corpus, args.kind, args.out, show_progress=not args.no_progress, **given)
    print(
        f"{args.kind} index of {len(built):,} documents in {time.perf_counter() - start:.1f}s -> {args.out}"
    )
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from searchgym.retrievers.index import load_index
    from searchgym.retrievers.server import create_app

    retriever = load_index(args.index)
    app = create_app(
        retriever, default_topk=args.topk, max_batch=args.max_batch, batch_wait_ms=args.batch_wait_ms
    )
    print(f"serving {args.index} ({type(retriever).__name__}) on http://{args.host}:{args.port}", flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    from searchgym.agents.grpo import load_config, train
    from searchgym.agents.train_log import read_metrics
    from searchgym.plots import plot_training_curves

    overrides = list(args.set)
    if args.run_dir:
        overrides.append(f"run_dir={args.run_dir}")
    if args.resume:
        overrides.append("resume=true")
    if args.no_progress:
        overrides.append("progress=false")
    cfg = load_config(args.config, overrides)
    summary = train(cfg)
    if summary["is_main_process"]:
        labels = {"base": "as loaded", "before": "before GRPO", "after": "after GRPO"}
        if cfg.warm_start_episodes:
            labels["before"] = "after SFT"
        for when, label in labels.items():
            metrics = summary[f"eval_{when}"]
            if metrics:
                print(
                    f"dev {label:>11}: EM {metrics['em']:.3f}  F1 {metrics['f1']:.3f}  "
                    f"searches {metrics['searches']:.2f}  invalid {metrics['invalid_rate']:.3f}  "
                    f"(n {metrics['n']:.0f})"
                )
        plots = plot_training_curves(read_metrics(cfg.run_dir), Path(cfg.run_dir) / "plots")
        print(
            f"{cfg.steps} steps in {summary['wall_s']:.0f} s; metrics, checkpoints and {len(plots)} "
            f"plots in {cfg.run_dir}"
        )
    return 0


def cmd_plot(args: argparse.Namespace) -> int:
    from searchgym.agents.train_log import read_metrics
    from searchgym.plots import plot_training_curves

    metrics = read_metrics(args.run_dir)
    if not any(len(row) > 1 for row in metrics):
        raise SearchGymError(f"{args.run_dir / 'metrics.jsonl'} holds no metrics yet")
    for path in plot_training_curves(metrics, args.out or args.run_dir / "plots", window=args.window):
        print(path)
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from searchgym.agents import make_agent, run_episodes, save_episodes, summarize, summarize_by
    from searchgym.agents.policy import SamplingParams
    from searchgym.envs.registry import make
    from searchgym.plots import plot_metric_by_group

    if args.n < 1:
        raise SearchGymError(f"--n must be at least 1, got {args.n}")
    env_kwargs = dict(args.env_arg)
    agent_names = [a.strip() for a in args.agent.split(",") if a.strip()]
    params = SamplingParams(max_new_tokens=args.max_new_tokens, temperature=args.temperature)
    for name in agent_names:
        make_agent(name, seed=args.seed, params=params)  # fail on a typo before any work
    make_kwargs = {**env_kwargs, **_simulator_kwargs(args.env, args.simulator, args.seed)}
    probe = make(args.env, **make_kwargs)
    all_tasks = getattr(probe.unwrapped, "tasks", None)
    probe.close()
    if not all_tasks:
        raise SearchGymError(f"{args.env} exposes no `tasks`; searchgym eval needs a task set")
    n = min(args.n, len(all_tasks))
    picks = np.random.default_rng(args.seed).choice(len(all_tasks), size=n, replace=False)
    tasks = [all_tasks[int(i)] for i in sorted(picks)]
    out = args.out or Path("runs") / "eval" / args.env.replace("/", "_")

    results: dict[str, dict[str, Any]] = {}
    for name in agent_names:
        with tqdm(total=n, desc=f"{name:>10}", disable=args.no_progress, file=sys.stderr) as bar:
            episodes = run_episodes(
                lambda: make(args.env, **make_kwargs),
                functools.partial(make_agent, name, seed=args.seed, params=params),
                tasks,
                n_envs=args.n_envs,
                seed=args.seed,
                on_episode=lambda _: bar.update(),
            )
        save_episodes(episodes, out / f"{_file_name(name)}.jsonl")
        results[name] = {"all": summarize(episodes), "by_hops": summarize_by(episodes, "hops")}

    report = {"env": args.env, "env_kwargs": env_kwargs, "n": n, "seed": args.seed, "agents": results}
    if args.simulator:
        report = {**report, "simulator": args.simulator}
    (out / "metrics.json").write_text(json.dumps(_finite(report), indent=2) + "\n")
    by_group = {name: {"all": r["all"], **r["by_hops"]} for name, r in results.items()}
    plot = plot_metric_by_group(by_group, out / "em.png", title=f"{args.env} · {n} tasks")
    if args.json:
        print(json.dumps(_finite(report)))
    else:
        simulated = f"  simulator {args.simulator}" if args.simulator else ""
        print(f"{args.env}  {n} tasks  seed {args.seed}  {env_kwargs or ''}{simulated}")
        print(format_table(results))
        print(f"trajectories, metrics.json and {plot.name} in {out}")
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from searchgym import sweep

    weights = sweep.parse_weights(args.weights)
    train_mode = args.config is not None
    if train_mode:
        misplaced = {
            "--env": args.env,
            "--env-arg": args.env_arg,
            "--agents": args.agents,
            "--generator": args.generator,
        }
        given = [flag for flag, value in misplaced.items() if value]
        if given:
            raise SearchGymError(
                f"{', '.join(given)}: not with --config, which trains on the config's env and evaluates the "
                "trained policies there"
            )
    elif args.set:
        raise SearchGymError("--set overrides keys of a training config: use it with --config")
    bar = tqdm(desc="sweep", unit="episode", disable=args.no_progress, file=sys.stderr)

    def tick(name: str) -> None:
        bar.set_postfix_str(name, refresh=False)
        bar.update()

    with bar:
        if train_mode:
            report = sweep.train_sweep(
                args.config,
                weights,
                overrides=args.set,
                out=args.out,
                n=args.n,
                n_envs=args.n_envs,
                progress=not args.no_progress,
                on_episode=tick,
            )
        else:
            from searchgym.agents.policy import SamplingParams

            env_id = args.env or sweep.DEFAULT_ENV
            names = args.agents or ",".join(sweep.DEFAULT_AGENTS)
            agents = [a.strip() for a in names.split(",") if a.strip()]
            env_kwargs = {**dict(args.env_arg), **_generator_kwargs(env_id, args.generator, args.seed)}
            report = sweep.evaluate_sweep(
                env_id,
                agents,
                weights,
                args.out or Path("runs") / "sweep",
                n=args.n,
                seed=args.seed,
                n_envs=args.n_envs,
                env_kwargs=env_kwargs,
                params=SamplingParams(max_new_tokens=256, temperature=0.0),
                on_episode=tick,
            )
    if args.json:
        print(json.dumps(report))
    else:
        print(f"{report['env']}  {report['n']} tasks  seed {report['seed']}  cost: λ per search")
        print(sweep.format_table(report))
        print(f"sweep.json and pareto.png in {Path(report['plot']).parent}")
    return 0


def _generator_kwargs(env_id: str, generator: str | None, seed: int) -> dict[str, Any]:
    """``{"generator": policy}`` for ``--generator BACKEND:MODEL``, for envs whose entry point
    takes a frozen generator (the planner env)."""
    applies_to = "envs with a frozen generator (such as searchgym/FictionalQA-Planner-v0)"
    return _simulator_kwargs(env_id, generator, seed, flag="--generator", applies_to=applies_to)


def _simulator_kwargs(
    env_id: str,
    simulator: str | None,
    seed: int,
    *,
    flag: str = "--simulator",
    applies_to: str = "envs with a simulated search engine (such as searchgym/FictionalQA-Simulated-v0)",
) -> dict[str, Any]:
    """``{"generator": policy}`` for ``--simulator BACKEND:MODEL`` (nothing without it), checked
    against the env: only envs whose entry point takes a ``generator`` get one. ``flag`` and
    ``applies_to`` name the option in errors (``--generator`` of `cmd_sweep` uses it too)."""
    if simulator is None:
        return {}
    import gymnasium as gym
    from gymnasium.envs.registration import load_env_creator

    from searchgym.agents.registry import load_policy

    backend, sep, model = simulator.partition(":")
    if not sep:
        raise SearchGymError(f"{flag} takes BACKEND:MODEL, e.g. hf:smollm2-135m-instruct; got {simulator!r}")
    if env_id in gym.registry:  # else `make` reports the unknown id
        entry = gym.spec(env_id).entry_point
        creator = entry if callable(entry) else load_env_creator(entry)
        if "generator" not in inspect.signature(creator).parameters:
            raise SearchGymError(f"{flag} applies to {applies_to}; {env_id} takes no generator")
    return {"generator": load_policy(backend, model, seed)}


def _file_name(agent: str) -> str:
    """``hf:/ckpt/step-10`` -> ``hf_ckpt_step-10``: agent names as file names."""
    return re.sub(r"[^\w.-]+", "_", agent).strip("_")


def format_table(results: dict[str, dict[str, Any]]) -> str:
    """One row per agent (all tasks), then one per agent and hop count."""
    header = ["agent", "hops"] + [label for _, label, _ in _COLUMNS]
    rows = []
    for name, r in results.items():
        groups = [("all", r["all"])] + [(str(h), m) for h, m in r["by_hops"].items()]
        for group, metrics in groups:
            rows.append([name, group] + [_fmt(fmt, metrics[key]) for key, _, fmt in _COLUMNS])
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    lines = ["  ".join(str(x).rjust(w) for x, w in zip(line, widths)) for line in [header, *rows]]
    return "\n".join(lines)


def _fmt(fmt: str, value: float) -> str:
    return "-" if isinstance(value, float) and math.isnan(value) else fmt.format(value)


def _finite(obj: Any) -> Any:
    """JSON has no NaN: write null instead."""
    if isinstance(obj, float) and math.isnan(obj):
        return None
    if isinstance(obj, dict):
        return {str(k): _finite(v) for k, v in obj.items()}
    return obj


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        commands = {
            "list": cmd_list,
            "eval": cmd_eval,
            "index": cmd_index,
            "serve": cmd_serve,
            "plot": cmd_plot,
            "train": cmd_train,
            "sweep": cmd_sweep,
        }
        return commands[args.command](args)
    except SearchGymError as e:
        print(f"searchgym: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # output piped into `head` and the like
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
