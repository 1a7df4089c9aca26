"""The agent protocols: `Agent` plays one episode at a time; a `BatchAgent` also acts for many
episodes in one call (the rollout groups agents by ``batch_key``)."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any, Protocol, runtime_checkable

from searchgym.errors import ConfigError


@runtime_checkable
class Agent(Protocol):
    """Turns observations into actions for one episode.

    ``reset`` receives the ``info`` of ``env.reset`` (a `searchgym.envs.contract.ResetInfo`: the
    ``task`` and the env's action ``protocol``); ``act`` receives each observation, the first one
    included, and returns the action text.
    """

    def reset(self, info: dict[str, Any]) -> None: ...

    def act(self, observation: str) -> str: ...


@runtime_checkable
class BatchAgent(Agent, Protocol):
    """An `Agent` that can also act for several episodes in one call. Agents whose ``batch_key``
    is equal (and not None) act together through their class's ``act_all``, which returns one
    action per agent, in order (policy-backed agents share one generation call this way)."""

    @property
    def batch_key(self) -> Hashable | None: ...

    @staticmethod
    def act_all(agents: Sequence[Any], observations: Sequence[str]) -> list[str]: ...


def check_agent(agent: object, name: str) -> Agent:
    """``agent`` if it has the `Agent` methods, else a `ConfigError` that says which are missing."""
    missing = [m for m in ("reset", "act") if not callable(getattr(agent, m, None))]
    if missing:
        raise ConfigError(
            f"agent {name!r} built a {type(agent).__name__}, which has no {' and no '.join(missing)} method; "
            "an agent needs reset(info) and act(observation) -> str"
        )
    return agent  # type: ignore[return-value]
