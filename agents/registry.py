"""Agents by name, as the CLI and configs refer to them."""

from __future__ import annotations

import difflib
from collections.abc import Callable

from searchgym.agents.base import Agent
from searchgym.agents.scripted import HeuristicAgent, OracleAgent, RandomAgent
from searchgym.errors import ConfigError

AGENTS: dict[str, Callable[[int], Agent]] = {
    "oracle": lambda seed: OracleAgent(),
    "heuristic": lambda seed: HeuristicAgent(),
    "random": lambda seed: RandomAgent(seed=seed),
}


def make_agent(name: str, seed: int = 0) -> Agent:
    """Build an agent from its name (see ``AGENTS``); ``seed`` seeds agents that sample."""
    try:
        factory = AGENTS[name]
    except KeyError:
        close = difflib.get_close_matches(name, AGENTS, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ConfigError(f"unknown agent {name!r}.{hint} Known agents: {', '.join(AGENTS)}") from None
    return factory(seed)
