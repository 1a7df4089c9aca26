"""``searchgym sweep``: accuracy against search cost over several cost weights."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from searchgym import sweep
from searchgym.agents.policies.base import SamplingParams
from searchgym.agents.train.config import load_config
from searchgym.commands.common import add_env_args, bounded_int, check_agents, generator_kwargs
from searchgym.commands.train import check_before_loading
from searchgym.errors import SearchGymError
from searchgym.files import check_writable_dir
from searchgym.registry import check_env_id


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sweep",
        help="accuracy against search cost over several cost weights, and the Pareto front (pareto.png)",
        description="Evaluate agents once and score them at every cost weight (reward at λ = reward at 0 "
        "- λ x searches), or with --config train one GRPO policy per weight and evaluate those. Writes "
        "sweep.json and pareto.png.",
    )
    p.add_argument("--weights", required=True, help="cost weights λ per search, comma separated: 0,0.05,0.1")
    p.add_argument("--env", default=None, help="environment id (default searchgym/FictionalQA-Planner-v0)")
    add_env_args(p, "as in eval")
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
    p.add_argument("--n-envs", type=bounded_int(1), default=4, help="env-agent pairs played side by side")
    p.add_argument(
        "--out", type=Path, default=None, help="output directory (default runs/sweep; train: the run_dir)"
    )
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    weights = sweep.parse_weights(args.weights)
    if args.out is not None:
        check_writable_dir(args.out, "--out")
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
    if train_mode:
        check_before_loading(load_config(args.config, args.set))  # before the bar shows
    else:
        env_id = args.env or sweep.DEFAULT_ENV
        check_env_id(env_id)
        names = args.agents or ",".join(sweep.DEFAULT_AGENTS)
        agents = [a.strip() for a in names.split(",") if a.strip()]
        params = SamplingParams(max_new_tokens=256, temperature=0.0)
        check_agents(agents, args.seed, params, flag="--agents")
        frozen = generator_kwargs(
            env_id,
            args.generator,
            args.seed,
            flag="--generator",
            applies_to="envs with a frozen generator (such as searchgym/FictionalQA-Planner-v0)",
        )
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
            report = sweep.evaluate_sweep(
                env_id,
                agents,
                weights,
                args.out or Path("runs") / "sweep",
                n=args.n,
                seed=args.seed,
                n_envs=args.n_envs,
                env_kwargs={**dict(args.env_arg), **frozen},
                params=params,
                on_episode=tick,
            )
    if args.json:
        print(json.dumps(report))
    else:
        print(f"{report['env']}  {report['n']} tasks  seed {report['seed']}  cost: λ per search")
        print(sweep.format_table(report))
        print(f"sweep.json and pareto.png in {Path(report['plot']).parent}")
    return 0
