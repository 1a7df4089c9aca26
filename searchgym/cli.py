"""The one command-line entry point: ``searchgym list | eval | train | sweep | index build |
serve | plot | view``. Each subcommand lives in its own module of `searchgym.commands`."""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from searchgym.errors import SearchGymError

COMMANDS = ("list", "eval", "train", "sweep", "index", "serve", "plot", "view")
"""Modules of `searchgym.commands`, in the order ``searchgym --help`` lists them."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="searchgym", description="Environments and training for language-model agents that search."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        importlib.import_module(f"searchgym.commands.{name}").add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except SearchGymError as e:
        print(f"searchgym: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # output piped into `head` and the like
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
