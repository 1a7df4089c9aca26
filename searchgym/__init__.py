"""searchgym: Gymnasium environments in which language-model agents answer questions by searching.

>>> import searchgym
>>> env = searchgym.make("searchgym/FictionalQA-BM25-v0")  # doctest: +SKIP
"""

__version__ = "0.1.0"

from searchgym.envs.registry import list_ids, make, register  # noqa: E402  (registers the envs)
from searchgym.registry import (  # noqa: E402
    list_agents,
    list_policies,
    list_retrievers,
    list_rewards,
    load_plugins,
    register_agent,
    register_policy,
    register_retriever,
    register_reward,
)

__all__ = [
    "__version__",
    "list_agents",
    "list_ids",
    "list_policies",
    "list_retrievers",
    "list_rewards",
    "load_plugins",
    "make",
    "register",
    "register_agent",
    "register_policy",
    "register_retriever",
    "register_reward",
]
