"""Argument types and helpers that several subcommands share."""

from __future__ import annotations

import argparse
import inspect
import math
from collections.abc import Callable
from typing import Any

import yaml

from searchgym.agents import make_agent
from searchgym.agents.registry import is_policy_agent, load_policy
from searchgym.config_types import YAMLLimitError, load_yaml
from searchgym.errors import SearchGymError
from searchgym.registry import user_code


def key_value(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` with the value read as YAML (an argparse type).

    >>> key_value("hops=[1, 2]")
    ('hops', [1, 2])
    """
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        return key, load_yaml(value)
    except YAMLLimitError as e:
        raise argparse.ArgumentTypeError(f"the value of {key}: {e.problem}") from None
    except yaml.YAMLError as e:
        raise argparse.ArgumentTypeError(
            f"the value of {key} is not valid YAML ({getattr(e, 'problem', e)})"
        ) from None


def check_agents(names: list[str], seed: int, params: Any = None, flag: str = "--agent") -> None:
    """Make each agent once, so that a typo, or a user's factory that is not callable or raises,
    fails in one line (a `SearchGymError` naming ``flag`` and the agent) before any work."""
    for name in names:
        if is_policy_agent(name):  # its model loads once, shared by the episodes
            make_agent(name, seed=seed, params=params)
            continue
        with user_code(f"{flag} {name}"):
            make_agent(name, seed=seed, params=params)


def bounded_int(low: int, high: int | None = None) -> Callable[[str], int]:
    """An argparse type: an integer from ``low`` to ``high`` (no upper bound if None).

    >>> bounded_int(0, 65535)("8000")
    8000
    """

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < low or (high is not None and value > high):
            bound = f"from {low} to {high}" if high is not None else f"at least {low}"
            raise argparse.ArgumentTypeError(f"must be {bound}, got {value}")
        return value

    return parse


def bounded_float(low: float, high: float) -> Callable[[str], float]:
    """An argparse type: a number from ``low`` to ``high`` (not NaN).

    >>> bounded_float(0, 1000)("2.5")
    2.5
    """

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not low <= value <= high:  # also refuses nan
            raise argparse.ArgumentTypeError(f"must be from {low:g} to {high:g}, got {text}")
        return value

    return parse


def add_env_args(parser: argparse.ArgumentParser, help: str) -> None:
    parser.add_argument(
        "--env-arg", "-E", action="append", type=key_value, default=[], metavar="KEY=VALUE", help=help
    )


def generator_kwargs(
    env_id: str,
    name: str | None,
    seed: int,
    *,
    flag: str = "--simulator",
    applies_to: str = "envs with a simulated search engine (such as searchgym/FictionalQA-Simulated-v0)",
) -> dict[str, Any]:
    """``{"generator": policy}`` for ``FLAG BACKEND:MODEL`` (nothing without it), checked against
    the env: only envs whose entry point takes a ``generator`` get one. ``flag`` and
    ``applies_to`` name the option in errors."""
    if name is None:
        return {}
    import gymnasium as gym

    from searchgym.envs.registry import env_factory

    backend, sep, model = name.partition(":")
    if not sep:
        raise SearchGymError(f"{flag} takes BACKEND:MODEL, e.g. hf:smollm2-135m-instruct; got {name!r}")
    if env_id in gym.registry and "generator" not in inspect.signature(env_factory(env_id)).parameters:
        raise SearchGymError(f"{flag} applies to {applies_to}; {env_id} takes no generator")
    return {"generator": load_policy(backend, model, seed)}


def finite(obj: Any) -> Any:
    """JSON has no NaN: write null instead.

    >>> finite({"a": float("nan"), "b": [1.0]})
    {'a': None, 'b': [1.0]}
    """
    if isinstance(obj, float) and math.isnan(obj):
        return None
    if isinstance(obj, dict):
        return {str(k): finite(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [finite(v) for v in obj]
    return obj
