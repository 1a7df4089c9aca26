"""Environments: `SearchEnv`, `WebEnv`, `PlannerEnv`, action protocols, tools, rewards, wrappers
and the registry."""

from searchgym.envs.planner_env import PlannerEnv, PlannerRewards
from searchgym.envs.protocols import TagsProtocol, ToolCallsProtocol, make_protocol
from searchgym.envs.registry import list_ids, make, register
from searchgym.envs.rewards import RewardWeights
from searchgym.envs.search_env import SearchEnv
from searchgym.envs.tools import ANSWER, SEARCH, Invalid, Tool, ToolCall
from searchgym.envs.web_env import WebEnv
from searchgym.envs.wrappers import TurnLimit

__all__ = [
    "ANSWER",
    "SEARCH",
    "Invalid",
    "PlannerEnv",
    "PlannerRewards",
    "RewardWeights",
    "SearchEnv",
    "TagsProtocol",
    "Tool",
    "ToolCall",
    "ToolCallsProtocol",
    "TurnLimit",
    "WebEnv",
    "list_ids",
    "make",
    "make_protocol",
    "register",
]
