"""Agents: the `Agent` and `BatchAgent` protocols, agents by name, the rollout runner, scripted
baselines and the trl adapter. Policies are in `searchgym.agents.policies`, training in
`searchgym.agents.train`."""

from searchgym.agents.base import Agent, BatchAgent
from searchgym.agents.integrations.trl import TrlEnv, trl_dataset, trl_model
from searchgym.agents.play.episode import Episode, Turn, load_episodes, save_episodes, summarize, summarize_by
from searchgym.agents.play.rollout import rollout, run_episodes
from searchgym.agents.registry import make_agent
from searchgym.agents.scripted.baselines import HeuristicAgent, OracleAgent, RandomAgent

__all__ = [
    "Agent",
    "BatchAgent",
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
    "trl_model",
]
