"""``searchgym list``: what is registered (envs by default; agents, policies, retrievers, protocols,
task sets), every reward term an env or the trainer can use (``rewards``), or the keys of
``searchgym train``'s config (``config``)."""

from __future__ import annotations

import argparse
import dataclasses
import re

import searchgym
from searchgym.agents.train.config import GRPOConfig
from searchgym.config_types import field_docs
from searchgym.envs.planner_env import PlannerRewards
from searchgym.envs.registry import list_ids
from searchgym.envs.rubric import Term
from searchgym.registry import REWARDS, TRAINER_REWARDS

WHAT = ("envs", "agents", "policies", "retrievers", "protocols", "task-sets", "rewards", "config")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "list",
        help="list registered env ids, agents, policies, retriever kinds, action protocols, task sets or "
        "rewards, or train's config keys",
    )
    p.add_argument("what", nargs="?", choices=WHAT, default="envs", help="what to list (default envs)")
    p.add_argument("--all", action="store_true", help="envs: include other namespaces than searchgym/")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.what == "config":
        print(config_keys())
        return 0
    if args.what == "rewards":
        print(reward_terms())
        return 0
    if args.what == "envs":
        names = list_ids(None if args.all else "searchgym")
    else:
        names = getattr(searchgym, f"list_{args.what.replace('-', '_')}")()
    print("\n".join(names))
    return 0


def reward_term_rows() -> list[tuple[str, str, str]]:
    """Per reward term: its name, level (``step``: measured by the env at each step; ``episode``:
    a registered function of the finished episode, plug-ins' included; ``trainer``: added by the
    trainer) and what it measures, with where its weight is set. Read from the rubric objects
    themselves: the planner's weights (every env's step terms, the planner's ``turns`` and
    ``beyond_rag``), every registered episode function, and the trainer's terms."""
    every_function = {name: 1.0 for name in REWARDS.names()}
    trainer = [Term(name, 1.0, "trainer", TRAINER_REWARDS.resolve(name)) for name in TRAINER_REWARDS.names()]
    rubric = PlannerRewards(beyond_rag=1.0, terms=every_function).rubric().plus(*trainer)
    rows = []
    for term in rubric.terms:
        weight = f"; weight rewards.terms.{term.name}" if term.when != "step" else ""
        rows.append((term.name, term.when, term.description + weight))
    return rows


def reward_terms() -> str:
    """`reward_term_rows` as aligned lines under a header (``searchgym list rewards``)."""
    rows = [("term", "level", "what it measures; where its weight is set"), *reward_term_rows()]
    width = [max(len(r[i]) for r in rows) for i in (0, 1)]
    return "\n".join(f"{name:<{width[0]}}  {when:<{width[1]}}  {doc}" for name, when, doc in rows)


def config_keys() -> str:
    """One line per key of `GRPOConfig`: its name, default and its docstring's first sentence."""
    docs = field_docs(GRPOConfig)
    rows = []
    for f in dataclasses.fields(GRPOConfig):
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        text = " ".join(docs[f.name].replace("``", "`").split())
        summary = re.split(r"(?<!e\.g)\.(?:\s|$)", text)[0]
        rows.append((f.name, repr(default), summary if len(summary) <= 90 else summary[:89] + "…"))
    width = [max(len(r[i]) for r in rows) for i in (0, 1)]
    return "\n".join(f"{name:<{width[0]}}  {default:<{width[1]}}  {doc}" for name, default, doc in rows)
