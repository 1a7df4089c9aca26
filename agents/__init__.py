"""Agents: the `Agent` protocol, scripted baselines and the rollout runner."""

from searchgym.agents.base import Agent
from searchgym.agents.registry import AGENTS, make_agent
from searchgym.agents.rollout import (
    Episode,
    Turn,
    load_episodes,
    rollout,
    run_episodes,
    save_episodes,
    summarize,
    summarize_by,
)
from searchgym.agents.scripted import HeuristicAgent, OracleAgent, RandomAgent

__all__ = [
    "AGENTS",
    "Agent",
    "Episode",
    "HeuristicAgent",
    "OracleAgent",
    "RandomAgent",
    "Turn",
    "load_episodes",
    "make_agent",
    "rollout",
    "run_episodes",
    "save_episodes",
    "summarize",
    "summarize_by",
]
