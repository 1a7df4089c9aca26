"""Agents by name, as the CLI and configs refer to them.

Scripted agents have plain names (``oracle``, ``heuristic``, ``random``; for the planner env
``planner-K``, the gold chain's first K hop queries, and ``planner-question``). Language-model agents
are ``BACKEND:MODEL``: ``hf:smollm2-135m-instruct``, ``hf:Qwen/Qwen2.5-0.5B-Instruct``,
``hf:/path/to/checkpoint``, ``vllm:MODEL`` (GPU extra), ``openai:MODEL`` (the server at
``$SEARCHGYM_OPENAI_BASE_URL``, default ``http://127.0.0.1:8000/v1``; key ``$OPENAI_API_KEY``).
Agents made with the same backend, model and seed share one loaded policy, so the rollout
batches their turns into one generation call.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import os
from collections.abc import Callable

from searchgym.agents.base import Agent
from searchgym.agents.planners import FixedPlanner, QuestionPlanner
from searchgym.agents.policy import Policy, SamplingParams
from searchgym.agents.scripted import HeuristicAgent, OracleAgent, RandomAgent
from searchgym.errors import ConfigError

AGENTS: dict[str, Callable[[int], Agent]] = {
    "oracle": lambda seed: OracleAgent(),
    "wasteful-oracle": lambda seed: OracleAgent(p_verify=0.5, seed=seed),
    "heuristic": lambda seed: HeuristicAgent(),
    "random": lambda seed: RandomAgent(seed=seed),
    **{f"planner-{k}": (lambda seed, k=k: FixedPlanner(k)) for k in range(5)},
    "planner-question": lambda seed: QuestionPlanner(),
}
# backend prefix -> how to build its policy from (model, seed); modules import on first use
POLICIES: dict[str, Callable[[str, int], Policy]] = {
    "hf": lambda model, seed: _policy_class("hf_policy:HFPolicy")(model, seed=seed),
    "vllm": lambda model, seed: _policy_class("vllm_policy:VLLMPolicy")(model, seed=seed),
    # seeds travel per request in SamplingParams; the server comes from the environment
    "openai": lambda model, seed: _policy_class("openai_policy:OpenAIPolicy")(
        model, base_url=os.environ.get("SEARCHGYM_OPENAI_BASE_URL", "http://127.0.0.1:8000/v1")
    ),
}
# evaluation samples greedily unless told otherwise
EVAL_PARAMS = SamplingParams(max_new_tokens=256, temperature=0.0)


@functools.lru_cache(maxsize=4)
def load_policy(backend: str, model: str, seed: int = 0) -> Policy:
    """The policy ``backend:model``, loaded once per process."""
    if backend not in POLICIES:
        known = ", ".join(sorted(POLICIES))
        raise ConfigError(f"unknown policy backend {backend!r} in '{backend}:{model}'; known: {known}")
    if not model:
        raise ConfigError(f"name a model after '{backend}:', e.g. '{backend}:smollm2-135m-instruct'")
    return POLICIES[backend](model, seed)


def _policy_class(path: str) -> type:
    module, cls = path.split(":")
    return getattr(importlib.import_module(f"searchgym.agents.{module}"), cls)


def make_agent(name: str, seed: int = 0, params: SamplingParams | None = None) -> Agent:
    """Build an agent from its name (see the module docstring); ``seed`` seeds agents that
    sample; ``params`` are the sampling settings of language-model agents."""
    if ":" in name:
        from searchgym.agents.llm_agent import PolicyAgent

        backend, model = name.split(":", 1)
        return PolicyAgent(load_policy(backend, model, seed), params or EVAL_PARAMS)
    try:
        factory = AGENTS[name]
    except KeyError:
        close = difflib.get_close_matches(name, AGENTS, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ConfigError(
            f"unknown agent {name!r}.{hint} Known agents: {', '.join(AGENTS)}, or BACKEND:MODEL with "
            f"BACKEND one of {', '.join(POLICIES)}"
        ) from None
    return factory(seed)
