"""Agents: the `Agent` protocol, scripted baselines, the rollout runner and the trl adapter."""

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
from searchgym.agents.trl_env import TrlEnv, trl_dataset

__all__ = [
    "AGENTS",
    "Agent",
    "Episode",
    "HeuristicAgent",
    "OracleAgent",
    "RandomAgent",
    "TrlEnv",
    "Turn",
    "load_episodes",
    "make_agent",
    "rollout",
    "run_episodes",
    "save_episodes",
    "summarize",
    "summarize_by",
    "trl_dataset",
]
