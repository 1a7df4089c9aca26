"""The one command-line entry point: ``searchgym list | eval | train | sweep | index build |
serve | serve-env | gateway | plot | view``. Each subcommand lives in its own module of
`searchgym.commands`."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import warnings
from typing import Any, NoReturn

from searchgym.errors import SearchGymError
from searchgym.registry import PluginWarning, import_modules

COMMANDS = (
    "list",
    "eval",
    "train",
    "rescore",
    "self_play",
    "sweep",
    "index",
    "serve",
    "serve_env",
    "gateway",
    "plot",
    "view",
)
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
    for command in _leaves(parser):
        command.add_argument(
            "--import",
            dest="imports",
            action="append",
            default=[],
            metavar="MODULE",
            help="import a module of yours first, which registers envs, agents, policies, retrievers, "
            "protocols, task sets or rewards (repeatable; the current directory is searched too)",
        )
    return parser


def _leaves(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """The parsers that run a command: the subcommands', and their own subcommands' (index build)."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        return [parser]
    return [leaf for action in subs for child in action.choices.values() for leaf in _leaves(child)]


def import_user_modules(names: list[str]) -> None:
    """Import ``names`` (after the installed plug-ins), so that what they register can be named;
    a bad name or module is an error naming ``--import`` (`searchgym.registry.import_modules`)."""
    import_modules(names, key="--import")


def main(argv: list[str] | None = None) -> int:
    """Run one command; its exit status. A bad input is one line on stderr and status 2 (``--debug``
    shows the traceback instead); Ctrl-C is one line and status 130."""
    debug = "--debug" in (sys.argv[1:] if argv is None else argv)
    with warnings.catch_warnings():
        warnings.showwarning = _one_line_plugin_warnings(warnings.showwarning)
        try:
            return _run(argv)
        except KeyboardInterrupt:
            if debug:
                raise
            print("searchgym: interrupted", file=sys.stderr)
            return 130


def _run(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)
    try:
        import_user_modules(args.imports)
        return args.run(args)
    except SearchGymError as e:
        if args.debug:
            raise
        print(f"searchgym: error: {' '.join(str(e).split())} (--debug shows where)", file=sys.stderr)
        return 2
    except BrokenPipeError:  # output piped into `head` and the like
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _one_line_plugin_warnings(show: Any) -> Any:
    """``warnings.showwarning`` that prints a plug-in's failure as one line, others as ``show`` does."""

    def show_warning(message, category, filename, lineno, file=None, line=None):  # noqa: ANN001
        if issubclass(category, PluginWarning):
            print(f"searchgym: warning: {message}", file=file or sys.stderr)
        else:
            show(message, category, filename, lineno, file, line)

    return show_warning


if __name__ == "__main__":
    sys.exit(main())
