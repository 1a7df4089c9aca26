"""A Python client of `searchgym serve-env`, on OpenEnv's own WebSocket client.

`SearchgymEnvClient` is an ``openenv.core.EnvClient`` with searchgym's messages: ``reset(seed=,
task_index=, task_id=)``, ``step(SearchgymAction(...))`` (or `text` / `call` for short) and
``state()``; it is async, and ``.sync()`` gives the blocking form OpenEnv gives every client::

    with SearchgymEnvClient(base_url="http://127.0.0.1:8001").sync() as env:
        result = env.reset(task_index=0)
        result = env.step(SearchgymAction(tool="search", arguments={"query": "Aurelio Vance"}))
        print(result.observation.text, result.reward, result.done)

`play_episode` plays a searchgym `Agent` (the scripted oracle or heuristic, or your own) over such
a client and records the `Episode` as ``searchgym eval`` would: its scores come from the server at
the answer. The server sends a task's gold answers, which the oracle reads, only when started with
``--reveal-answers``; otherwise the episode's ``answers`` and ``evidence`` are empty.
"""

from __future__ import annotations

from typing import Any

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient

from searchgym.agents.base import Agent
from searchgym.agents.integrations.openenv.messages import (
    SearchgymAction,
    SearchgymObservation,
    SearchgymState,
)
from searchgym.agents.play.episode import Episode
from searchgym.agents.play.session import agent_reset_info


class SearchgymEnvClient(EnvClient[SearchgymAction, SearchgymObservation, SearchgymState]):
    """OpenEnv's WebSocket client for a searchgym env server (see the module docstring)."""

    def _step_payload(self, action: SearchgymAction) -> dict[str, Any]:
        return action.model_dump(exclude_none=True, exclude={"metadata"})

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[SearchgymObservation]:
        observation = SearchgymObservation(
            **payload.get("observation", {}), reward=payload.get("reward"), done=payload.get("done", False)
        )
        return StepResult(observation, observation.reward, observation.done, observation.metadata)

    def _parse_state(self, payload: dict[str, Any]) -> SearchgymState:
        return SearchgymState(**payload)


def play_episode(env: Any, agent: Agent, **reset: Any) -> Episode:
    """Play one episode of ``agent`` over ``env`` (a synchronous `SearchgymEnvClient`), reset with
    ``reset`` (``task_index``, ``task_id``, ``seed``); the episode as ``searchgym eval`` records it."""
    result = env.reset(**reset)
    info = agent_reset_info(result.observation.metadata)
    agent.reset(info)
    episode = Episode.of(info["task"])
    observation = result.observation.text
    while not result.done:
        action = agent.act(observation)
        result = env.step(SearchgymAction(text=action))
        meta = result.observation.metadata
        observation = result.observation.text
        episode.record(action, observation, result.reward, meta["terminated"], meta["truncated"], meta)
    return episode
