"""The one command-line entry point: ``searchgym list | eval | train | sweep | index build |
serve | plot``. Each subcommand lives in its own module of `searchgym.commands`."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import NoReturn

from searchgym.errors import SearchGymError

COMMANDS = ("list", "eval", "train", "sweep", "index", "serve", "plot")
"""Modules of `searchgym.commands`, in the order ``searchgym --help`` lists them."""


class _Parser(argparse.ArgumentParser):
    """An argparse parser whose errors are one line: what was wrong and where to read more."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="searchgym", description="Environments and training for language-model agents that search."
    )
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        importlib.import_module(f"searchgym.commands.{name}").add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except SearchGymError as e:
        if args.debug:
            raise
        print(f"searchgym: error: {' '.join(str(e).split())} (--debug shows where)", file=sys.stderr)
        return 2
    except BrokenPipeError:  # output piped into `head` and the like
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
