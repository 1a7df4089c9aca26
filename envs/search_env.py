"""`SearchEnv`: answer a question with a search tool over any retriever."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from searchgym.config_types import check_int
from searchgym.envs.protocols import DEFAULT_GOAL, ActionProtocol, make_protocol
from searchgym.envs.rewards import RewardWeights
from searchgym.envs.text_env import MAX_OBSERVATION_CHARS as MAX_OBSERVATION_CHARS
from searchgym.envs.text_env import Charges, RetrieverEnv
from searchgym.envs.tools import ANSWER, CITED_ANSWER, SEARCH, ToolCall, split_citations
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

    With ``citations`` (CaRR's citation protocol) the answer ends with the title of each passage
    it rests on in square brackets, ``Zatira Garick [Dreisent]``: the answer before the first
    bracket is scored, and the answer step adds ``citations`` (the titles) and ``cited_ids`` (the
    ids of the passages shown in this episode under those titles), which the ``citation`` term
    (`searchgym.envs.rubric.citation`) reads.

    With ``judge`` (ReSeek's JUDGE action) the instructions ask the agent to open each action
    after a search result with ``<judge>Yes</judge>`` or ``<judge>No</judge>``: was that result
    useful? Every step's info holds its ``judgement`` (True, False, or None where it wrote none),
    which the ``judge`` term (`searchgym.envs.rubric.judge`) scores.

    With ``closed_book`` there is no search tool: the agent answers from what it knows, which
    `searchgym eval --closed-book` compares with its searching (AdaSearch's decision metric,
    `searchgym.agents.play.failures.decisions`).
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
        citations: bool = False,
        judge: bool = False,
        closed_book: bool = False,
    ) -> None:
        if not tasks:
            raise ConfigError("SearchEnv needs at least one task")
        check_int("top_k", top_k)
        check_int("max_obs_tokens", max_obs_tokens)
        answer = CITED_ANSWER if citations else ANSWER
        goal = f"{DEFAULT_GOAL} {JUDGE_RULE}" if judge else DEFAULT_GOAL
        if isinstance(protocol, str):
            tools = (answer,) if closed_book else (SEARCH, answer)
            protocol = make_protocol(protocol, tools, goal=CLOSED_BOOK_GOAL if closed_book else goal)
        elif judge and JUDGE_RULE not in protocol.goal:
            raise ConfigError(
                "judge: name the protocol (protocol='tags'), so that its instructions ask for judgements"
            )
        if citations and CITED_ANSWER not in protocol.tools:
            raise ConfigError(
                "citations: the protocol's answer tool must be searchgym.envs.tools.CITED_ANSWER; "
                "name the protocol (protocol='tags') and the env gives it that tool"
            )
        self.citations = citations
        self.judge = judge
        unsupported = {t.name for t in protocol.tools} - {"search", "answer"}
        if unsupported:
            raise ValueError(f"SearchEnv has no handler for tool(s) {sorted(unsupported)}")
        rewards = rewards or RewardWeights()
        super().__init__(tasks, retriever, protocol, rewards, top_k=top_k, max_obs_tokens=max_obs_tokens)

    def _step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        judged = judgement(action) if self.judge else None
        observation, reward, terminated, truncated, info = super()._step(action)
        if self.judge:
            info["judgement"] = judged
        return observation, reward, terminated, truncated, info

    # -- tools -------------------------------------------------------------------------------
    def _call(self, call: ToolCall, info: dict[str, Any]) -> tuple[str, float, float, Charges]:
        if call.name == "search":
            observation, charges = self._search(call, info)
            return observation, 0.0, 0.0, charges
        return self._answer(call, info)

    def _answer(self, call: ToolCall, info: dict[str, Any]) -> tuple[str, float, float, Charges]:
        answer = call.arguments["answer"]
        if self.citations:
            answer, titles = split_citations(answer)
            info["citations"] = titles
            info["cited_ids"] = sorted({doc for title in titles for doc in self._shown_titles.get(title, ())})
        return "", *self._score_answer(answer, info)


CLOSED_BOOK_GOAL = "Answer the given question from what you know; there is nothing to search."
JUDGE_RULE = (
    "After each search result, start your next action with <judge>Yes</judge> if the result helps "
    "answer the question, or <judge>No</judge> if it does not."
)
"""What a ``judge`` env adds to the instructions (ReSeek's JUDGE action)."""
_JUDGE = re.compile(r"<judge>\s*(yes|no)\s*</judge>", re.I)


def judgement(action: str) -> bool | None:
    """The first ``<judge>`` verdict of ``action``: True for Yes, False for No, None for none.

    >>> judgement("<judge>Yes</judge> <answer> Paris </answer>"), judgement("<search> q </search>")
    (True, None)
    """
    match = _JUDGE.search(action)
    return None if match is None else match.group(1).lower() == "yes"
