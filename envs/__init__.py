"""Environments: `SearchEnv`, action protocols, tools, rewards, wrappers and the registry."""

from searchgym.envs.protocols import TagsProtocol, ToolCallsProtocol, make_protocol
from searchgym.envs.registry import list_ids, make, register
from searchgym.envs.rewards import RewardWeights
from searchgym.envs.search_env import SearchEnv
from searchgym.envs.tools import ANSWER, SEARCH, Invalid, Tool, ToolCall
from searchgym.envs.wrappers import TurnLimit

__all__ = [
    "ANSWER",
    "SEARCH",
    "Invalid",
    "RewardWeights",
    "SearchEnv",
    "TagsProtocol",
    "Tool",
    "ToolCall",
    "ToolCallsProtocol",
    "TurnLimit",
    "list_ids",
    "make",
    "make_protocol",
    "register",
]
