"""The `Agent` protocol: one agent plays one episode at a time."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class Agent(Protocol):
    """Turns observations into actions for one episode.

    ``reset`` receives the ``info`` of ``env.reset`` (which carries the ``task`` and the env's
    action ``protocol``); ``act`` receives each observation, the first one included, and returns
    the action text.
    """

    def reset(self, info: dict[str, Any]) -> None: ...

    def act(self, observation: str) -> str: ...
