"""MkDocs hook: the reference pages generated from the code at every build, so they cannot drift.

- ``reference/environments.md``: every registered ``searchgym/`` id with its description, the
  options its entry point takes (with their defaults), its action protocols and reward terms;
- ``reference/cli.md``: every ``searchgym`` command with its ``--help``, from the parser itself;
- ``reference/config.md``: every key of `GRPOConfig` (``searchgym train --config``), with its type,
  default and docstring.

It also lays out the import package for mkdocstrings, which renders ``reference/api.md`` from the
docstrings: the sub-packages live in top-level folders (``envs/`` is ``searchgym.envs``, as
pyproject.toml maps them), which griffe cannot follow, so ``build/api-src/searchgym`` links each
where the import system finds it.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import shutil
from pathlib import Path

import gymnasium as gym
from mkdocs.plugins import event_priority
from mkdocs.structure.files import File, Files

import searchgym
from searchgym.agents.train.config import GRPOConfig
from searchgym.cli import build_parser
from searchgym.commands.list import reward_term_rows
from searchgym.config_types import describe, field_docs
from searchgym.envs.factories import search_env
from searchgym.envs.registry import env_factory, list_ids
from searchgym.envs.rewards import RewardWeights
from searchgym.envs.search_env import SearchEnv

ROOT = Path(__file__).resolve().parents[1]
API_SRC = ROOT / "build" / "api-src"  # mkdocs.yml's mkdocstrings paths


@event_priority(100)  # before mkdocstrings' on_config: its handler drops search paths that do not exist
def on_config(config):
    """Link the import package's layout under `API_SRC` for mkdocstrings (see the module doc)."""
    shutil.rmtree(API_SRC, ignore_errors=True)
    package = API_SRC / "searchgym"
    package.mkdir(parents=True)
    for entry in (ROOT / "searchgym").iterdir():
        (package / entry.name).symlink_to(entry)
    # a copy, not a link: griffe resolves the package's folder from its __init__.py
    (package / "__init__.py").unlink()
    shutil.copy(ROOT / "searchgym" / "__init__.py", package / "__init__.py")
    for folder in ("envs", "agents", "retrievers", "tasks"):
        (package / folder).symlink_to(ROOT / folder)
    return config


def on_files(files: Files, config) -> Files:
    pages = {
        "reference/environments.md": environments(),
        "reference/cli.md": cli(),
        "reference/config.md": config_keys(),
    }
    for name, content in pages.items():
        files.append(File.generated(config, name, content=content))
    return files


def environments() -> str:
    lines = [
        "# Environments",
        "",
        "Every id `searchgym.make` (or `gymnasium.make`, once searchgym is imported) knows, with the "
        "keyword arguments it takes (`searchgym eval -E key=value`). Generated from the registry.",
        "",
        f"Action protocols: {', '.join(f'`{p}`' for p in searchgym.list_protocols())} "
        "(option `protocol`, where an id takes it). "
        "Reward weights (option `rewards`, a mapping): "
        + ", ".join(f"`{f}`" for f in RewardWeights.__dataclass_fields__)
        + ". Reward terms, those `rewards.terms` weighs included (`searchgym list rewards`):",
        "",
        "| term | level | what it measures; where its weight is set |",
        "|---|---|---|",
        *(f"| `{name}` | {level} | {what} |" for name, level, what in reward_term_rows()),
        "",
    ]
    for env_id in list_ids("searchgym"):
        spec = gym.registry[env_id]
        creator = env_factory(env_id)
        doc = inspect.getdoc(creator) or ""
        lines += [f"## `{env_id}`", "", " ".join(doc.split("\n\n")[0].split()), ""]
        fixed = set(spec.kwargs)
        params = _options(creator)
        rows = [(n, d) for n, d in params if n not in fixed]
        if rows:
            lines += ["| option | default |", "|---|---|"]
            lines += [f"| `{name}` | `{default}` |" for name, default in rows]
            lines.append("")
    return "\n".join(lines)


def _options(fn, skip: frozenset[str] = frozenset()) -> list[tuple[str, str]]:
    """The keyword options of an env's entry point, with the ``**options`` it hands on expanded:
    to `search_env`'s where its docstring says so, and `search_env`'s to `SearchEnv`'s."""
    found = []
    for p in inspect.signature(fn).parameters.values():
        if p.name in skip or p.name == "self":
            continue
        if p.kind is p.VAR_KEYWORD:
            if fn is search_env:
                found += _options(SearchEnv.__init__, frozenset({"tasks", "retriever", "rewards"}))
            elif "search_env" in (inspect.getdoc(fn) or ""):
                found += _options(search_env, frozenset({"tasks", "retriever"}))
            else:
                found.append((f"**{p.name}", "see the entry point's docstring"))
        elif p.kind is p.KEYWORD_ONLY or p.default is not p.empty:
            found.append((p.name, "required" if p.default is p.empty else repr(p.default)))
    return found


def cli() -> str:
    parser = build_parser()
    lines = [
        "# Command line",
        "",
        "Every `searchgym` command, as `--help` prints it. Generated from the parser.",
        "",
    ]
    lines += ["```text", parser.format_help().rstrip(), "```", ""]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                lines += [f"## `searchgym {name}`", "", "```text", sub.format_help().rstrip(), "```", ""]
                lines += _nested(sub, f"searchgym {name}")
    return "\n".join(lines)


def _nested(parser: argparse.ArgumentParser, prefix: str) -> list[str]:
    lines = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                lines += [f"### `{prefix} {name}`", "", "```text", sub.format_help().rstrip(), "```", ""]
    return lines


def config_keys() -> str:
    docs = field_docs(GRPOConfig)
    lines = [
        "# Training configuration",
        "",
        "Every key of a `searchgym train --config FILE.yaml` file (or `--set KEY=VALUE`), with its type "
        "and default: the fields of `GRPOConfig`, generated from their docstrings (`searchgym list config` "
        "prints them in short). Unknown keys are an error.",
        "",
    ]
    for f in dataclasses.fields(GRPOConfig):
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        lines += [f"## `{f.name}`", "", f"`{describe(f.type)}`, default `{default!r}`", "", docs[f.name], ""]
    return "\n".join(lines)
