"""Agents by name, as the CLI and configs refer to them (the names live in `searchgym.registry`).

Scripted agents have plain names (``oracle``, ``wasteful-oracle``, ``heuristic``, ``random``; for
the planner env ``planner-K``, the gold chain's first K hop queries, and ``planner-question``);
``module:attr`` names a user's own agent class or factory. Language-model agents are
``BACKEND:MODEL``: ``hf:smollm2-135m-instruct``, ``hf:Qwen/Qwen2.5-0.5B-Instruct``,
``hf:/path/to/checkpoint``, ``vllm:MODEL`` (GPU extra), ``openai:MODEL`` (the server at
``$SEARCHGYM_OPENAI_BASE_URL``, default ``http://127.0.0.1:8000/v1``; key ``$OPENAI_API_KEY``).
Agents made with the same backend, model and seed share one loaded policy, so the rollout
batches their turns into one generation call.
"""

from __future__ import annotations

import functools

from searchgym.agents.base import Agent, check_agent
from searchgym.agents.policies.agent import PolicyAgent
from searchgym.agents.policies.base import Policy, SamplingParams
from searchgym.errors import ConfigError
from searchgym.registry import AGENTS, POLICIES, takes

# evaluation samples greedily unless told otherwise
EVAL_PARAMS = SamplingParams(max_new_tokens=256, temperature=0.0)


@functools.lru_cache(maxsize=4)
def load_policy(backend: str, model: str, seed: int = 0) -> Policy:
    """The policy ``backend:model``, loaded once per process."""
    if not model:
        raise ConfigError(f"name a model after '{backend}:', e.g. '{backend}:smollm2-135m-instruct'")
    return POLICIES.make(backend, model, seed=seed)


def is_policy_agent(name: str) -> bool:
    """``BACKEND:MODEL`` (a language-model agent) rather than a registered name or ``module:attr``.

    >>> is_policy_agent("hf:smollm2-135m-instruct"), is_policy_agent("my_pkg.agents:MyAgent")
    (True, False)
    """
    backend, sep, _ = name.partition(":")
    return bool(sep) and backend in POLICIES


def make_agent(name: str, seed: int = 0, params: SamplingParams | None = None) -> Agent:
    """Build an agent from its name (see the module docstring); ``seed`` seeds agents that take
    one; ``params`` are the sampling settings of language-model agents."""
    if is_policy_agent(name):
        backend, model = name.split(":", 1)
        return PolicyAgent(load_policy(backend, model, seed), params or EVAL_PARAMS)
    spec = AGENTS.spec(name)
    factory = spec.load()
    kwargs = dict(spec.kwargs)
    if takes(factory, "seed"):
        kwargs["seed"] = seed
    return check_agent(factory(**kwargs), name)
