"""`SearchEnv`: answer a question with a search tool over any retriever."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from searchgym.config_types import check_int
from searchgym.envs.protocols import ActionProtocol, make_protocol
from searchgym.envs.rewards import RewardWeights
from searchgym.envs.text_env import MAX_OBSERVATION_CHARS as MAX_OBSERVATION_CHARS
from searchgym.envs.text_env import Charges, RetrieverEnv
from searchgym.envs.tools import ToolCall
from searchgym.errors import ConfigError
from searchgym.retrievers.base import Retriever
from searchgym.tasks.task import Task


class SearchEnv(RetrieverEnv):
    """A question, a search tool over ``retriever`` and an answer tool.

    Observations and actions are text. ``reset`` shows the instructions and the question;
    each ``step`` takes the agent's text, parses one tool call with the action protocol and
    returns the tool's result. The episode terminates when the agent answers. The env has no
    turn limit of its own: the factories (`searchgym.envs.factories.search_env`, behind the
    registered ids) put it under a `TurnLimit` of ``max_turns``, which truncates the episode.

    Every ``info`` carries the step's reward components (the values of the rubric's terms:
    ``outcome``, ``format``, ``search_calls``, ``obs_tokens_1k`` and any episode terms),
    the episode's counters (``n_searches``, ``n_invalid``, ``n_extra_calls``, ``n_errors``,
    ``obs_tokens``) and the step's ``tool`` and ``error``; the answer step adds ``prediction``,
    ``em``, ``f1``, ``cover_em`` and ``evidence_recall``.
    """

    def __init__(
        self,
        tasks: Sequence[Task],
        retriever: Retriever,
        *,
        protocol: str | ActionProtocol = "tags",
        top_k: int = 3,
        max_obs_tokens: int = 512,
        rewards: RewardWeights | None = None,
    ) -> None:
        if not tasks:
            raise ConfigError("SearchEnv needs at least one task")
        check_int("top_k", top_k)
        check_int("max_obs_tokens", max_obs_tokens)
        protocol = make_protocol(protocol) if isinstance(protocol, str) else protocol
        unsupported = {t.name for t in protocol.tools} - {"search", "answer"}
        if unsupported:
            raise ValueError(f"SearchEnv has no handler for tool(s) {sorted(unsupported)}")
        rewards = rewards or RewardWeights()
        super().__init__(tasks, retriever, protocol, rewards, top_k=top_k, max_obs_tokens=max_obs_tokens)

    # -- tools -------------------------------------------------------------------------------
    def _call(self, call: ToolCall, info: dict[str, Any]) -> tuple[str, float, float, Charges]:
        if call.name == "search":
            observation, charges = self._search(call, info)
            return observation, 0.0, 0.0, charges
        return self._answer(call, info)

    def _answer(self, call: ToolCall, info: dict[str, Any]) -> tuple[str, float, float, Charges]:
        return "", *self._score_answer(call.arguments["answer"], info)
