"""searchgym: Gymnasium environments in which language-model agents answer questions by searching.

>>> import searchgym
>>> env = searchgym.make("searchgym/FictionalQA-BM25-v0")  # doctest: +SKIP
"""

__version__ = "0.1.0"

import importlib
import importlib.util

from searchgym.envs.registry import list_ids, make, register  # noqa: E402  (registers the envs)
from searchgym.registry import (  # noqa: E402
    list_agents,
    list_policies,
    list_protocols,
    list_retrievers,
    list_rewards,
    list_task_sets,
    load_plugins,
    register_agent,
    register_policy,
    register_protocol,
    register_retriever,
    register_reward,
    register_task_set,
)

__all__ = [
    "__version__",
    "list_agents",
    "list_ids",
    "list_policies",
    "list_protocols",
    "list_retrievers",
    "list_rewards",
    "list_task_sets",
    "load_environment",
    "load_plugins",
    "make",
    "register",
    "register_agent",
    "register_policy",
    "register_protocol",
    "register_retriever",
    "register_reward",
    "register_task_set",
]

# verifiers loads plug-ins by module name: ``vf-eval searchgym`` (verifiers 0.4) takes the Taskset
# and Harness subclasses this module's __all__ exports, and verifiers 0.3's
# ``load_environment("searchgym", ...)`` calls `load_environment`. They resolve lazily (`__getattr__`,
# an import on call), so that `import searchgym` never imports verifiers; __all__ names the
# classes only where verifiers is installed, so that `from searchgym import *` works without it.
_VERIFIERS = {
    "SearchgymTaskset": "searchgym.agents.integrations.verifiers.v0_4",
    "SearchgymHarness": "searchgym.agents.integrations.verifiers.v0_4",
}
if importlib.util.find_spec("verifiers") is not None:
    __all__ += ["SearchgymHarness", "SearchgymTaskset"]


def load_environment(**kwargs: object) -> object:
    """verifiers 0.3's entry point: ``verifiers.load_environment("searchgym", **kwargs)`` calls it.
    Returns the env of `searchgym.agents.integrations.verifiers.v0_3.load_environment` (imported
    on call, so that `import searchgym` never imports verifiers)."""
    from searchgym.agents.integrations.verifiers.v0_3 import load_environment as load

    return load(**kwargs)


def __getattr__(name: str) -> object:
    if name in _VERIFIERS:
        return getattr(importlib.import_module(_VERIFIERS[name]), name)
    raise AttributeError(f"module 'searchgym' has no attribute {name!r}")
