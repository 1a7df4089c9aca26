"""``searchgym self-play``: Search Self-play's proposer and solver, and the verified questions."""

from __future__ import annotations

import argparse
import functools
import json
from collections import Counter
from pathlib import Path

from searchgym.commands.common import add_env_args, bounded_int, check_agents, key_value
from searchgym.files import check_writable_dir


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "self-play",
        help="a proposer writes questions for given answers, each verified against the world; a solver's "
        "pass rate scores them (Search Self-play); the verified questions become a task set",
        description=(
            "Plays --proposer on searchgym/FictionalQA-Propose-v0 (given an answer, it searches and "
            "proposes a question), verifies each proposal exactly against the generated world (one reading, "
            "whose answer is the given one, every hop's passage shown to the proposer), plays --solver "
            "--solver-episodes "
            "times on each verified question, and writes OUT/questions.jsonl (pose it with "
            "`searchgym eval -E task_set=OUT/questions.jsonl`), OUT/proposals.jsonl (every proposal's "
            "verdict, pass rate and reward) and both agents' episodes."
        ),
    )
    p.add_argument("--proposer", default="oracle", help="the agent that proposes (default oracle)")
    p.add_argument("--solver", default="heuristic", help="the agent that answers (default heuristic)")
    p.add_argument("--n", type=bounded_int(1), default=50, help="proposals, one answer each (default 50)")
    p.add_argument(
        "--solver-episodes", type=bounded_int(1), default=4, help="per verified question (default 4)"
    )
    p.add_argument(
        "--rule",
        choices=("inverse", "intermediate"),
        default="inverse",
        help="the proposer's reward from the pass rate s: 1 - s (SSP's default) or 4 s (1 - s)",
    )
    add_env_args(p, "option of the proposer's env, e.g. -E hops=2 -E split=train (seed, n_passages and "
                 "backend also make the solver's)")  # fmt: skip
    p.add_argument(
        "--solver-arg", "-S", action="append", default=[], type=key_value, metavar="KEY=VALUE",
        help="option of the solver's env, searchgym/FictionalQA-BM25-v0 (e.g. -S max_turns=4)",
    )  # fmt: skip
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--temperature", type=float, default=0.0, help="language-model agents (default 0: greedy)")
    p.add_argument("--max-new-tokens", type=int, default=256, help="language-model agents: per turn")
    p.add_argument("--out", type=Path, default=Path("runs/self-play"), help="output directory")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from searchgym.agents import make_agent, save_episodes
    from searchgym.agents.play.rollout import episode_progress
    from searchgym.agents.play.self_play import self_play, write_questions
    from searchgym.agents.policies.base import SamplingParams

    out = check_writable_dir(args.out, "--out")
    params = SamplingParams(max_new_tokens=args.max_new_tokens, temperature=args.temperature)
    check_agents([args.proposer], args.seed, params, flag="--proposer")
    check_agents([args.solver], args.seed, params, flag="--solver")
    agent = functools.partial(make_agent, seed=args.seed, params=params)
    most = args.n * (1 + args.solver_episodes)  # every proposal verified
    with episode_progress(most, "episodes", disable=args.no_progress) as callbacks:
        proposals, solved = self_play(
            functools.partial(agent, args.proposer),
            functools.partial(agent, args.solver),
            n=args.n,
            solver_episodes=args.solver_episodes,
            env_kwargs=dict(args.env_arg),
            solver_kwargs=dict(args.solver_arg),
            rule=args.rule,
            seed=args.seed,
            on_episode=callbacks["on_episode"],
        )
    questions = write_questions(proposals, out / "questions.jsonl")
    with (out / "proposals.jsonl").open("w", encoding="utf-8") as f:
        for p in proposals:
            f.write(json.dumps(p.row(), ensure_ascii=False) + "\n")
    save_episodes([p.episode for p in proposals], out / "proposer.jsonl")
    save_episodes(solved, out / "solver.jsonl")
    verified = [p for p in proposals if p.verdict.verified]
    who = f"{args.proposer} proposing, {args.solver} solving"
    print(f"{len(verified)} of {len(proposals)} proposals verified ({who})")
    for verdict, count in Counter(p.verdict.verdict for p in proposals).most_common():
        print(f"  {verdict}: {count}")
    if verified:
        rate = sum(p.pass_rate or 0.0 for p in verified) / len(verified)
        reward = sum(p.reward for p in proposals) / len(proposals)
        print(f"solver pass rate {rate:.3f} on the verified; mean proposer reward {reward:.3f} ({args.rule})")
    print(f"questions in {questions} (pose them with -E task_set={questions}); the rest in {out}")
    return 0
