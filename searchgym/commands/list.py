"""``searchgym list``: what is registered (envs by default; agents, policies, retrievers, rewards)."""

from __future__ import annotations

import argparse

WHAT = ("envs", "agents", "policies", "retrievers", "rewards")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "list", help="list registered environment ids, agents, policies, retrievers or rewards"
    )
    p.add_argument("what", nargs="?", choices=WHAT, default="envs", help="what to list (default envs)")
    p.add_argument("--all", action="store_true", help="envs: include other namespaces than searchgym/")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import searchgym

    if args.what == "envs":
        from searchgym.envs.registry import list_ids

        names = list_ids(None if args.all else "searchgym")
    else:
        names = getattr(searchgym, f"list_{args.what}")()
    print("\n".join(names))
    return 0
