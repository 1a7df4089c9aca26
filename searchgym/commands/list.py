"""``searchgym list``: the registered environment ids."""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("list", help="list registered environment ids")
    p.add_argument("--all", action="store_true", help="include other namespaces than searchgym/")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from searchgym.envs.registry import list_ids

    print("\n".join(list_ids(None if args.all else "searchgym")))
    return 0
