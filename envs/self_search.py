"""`SelfSearchEnv` (SSRL): the policy searches its own knowledge.

After ``<search> q </search>`` no tool runs: the env opens an ``<information>`` block and the
policy's next action is the information itself, ended by ``</information>``. Those tokens are
the policy's but carry no learning signal of their own, so agents that keep token streams
(`PolicyAgent`) mask them out of the loss exactly like retrieved text; the step's
``info["self_information"]`` says so too.

Rewards follow SSRL: ``0.9·EM + 0.1·format`` by default, and an episode that writes more than
``MAX_ANSWER_TAGS`` answer tags has its outcome cut by 4×. The same tasks run against a real
retriever with the Search-R1 protocol (``FictionalQA-BM25-v0``) for the sim-to-real check.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from searchgym.envs.observations import count_tokens
from searchgym.envs.protocols import TagsProtocol
from searchgym.envs.rewards import RewardWeights
from searchgym.envs.search_env import SearchEnv
from searchgym.envs.text_env import Charges
from searchgym.envs.tools import ToolCall
from searchgym.tasks.task import Task

MAX_ANSWER_TAGS = 10
SSRL_REWARDS = RewardWeights(outcome=0.9, format=0.1)
OPEN, CLOSE = "<information>", "</information>"


class SelfSearchProtocol(TagsProtocol):
    """Search-R1's tags, with instructions to write the search results oneself."""

    self_search = True

    def __init__(self) -> None:
        super().__init__()
        self.stop = (*self.stop, CLOSE)

    def instructions(self, question: str) -> str:
        return (
            "Answer the given question. Reason inside <think> and </think> first every time you get "
            "new information. To look something up, write a query as <search> query </search>, then "
            f"write what a search engine would return for it, from your own knowledge, between {OPEN} "
            f"and {CLOSE}. Search as many times as you need. When you know the answer, give it as "
            f"<answer> answer </answer>, for example <answer> Beijing </answer>.\nQuestion: {question}\n"
        )


class SelfSearchEnv(SearchEnv):
    """Questions answered with searches the policy answers itself (no retriever)."""

    def __init__(self, tasks: Sequence[Task], *, rewards: RewardWeights | None = None) -> None:
        no_retriever: Any = None
        super().__init__(tasks, no_retriever, protocol=SelfSearchProtocol(), rewards=rewards or SSRL_REWARDS)

    def _new_episode(self) -> None:
        super()._new_episode()
        self._writing = False
        self._answer_tags = 0

    def step(self, action: str):
        if not self._writing:
            if isinstance(action, str):
                self._answer_tags += action.count("<answer>")
            observation, reward, terminated, truncated, info = super().step(action)
            info["self_information"] = False
            return observation, reward, terminated, truncated, info
        # the policy's own search results: not parsed as an action
        self._begin_turn(action)
        self._writing = False
        closed = CLOSE in action
        info = {
            "turn": self._turn,
            "tool": None,
            "error": None,
            "self_information": True,
            "info_tokens": count_tokens(action),
            "reward_components": dict.fromkeys((t.name for t in self.rubric.at("step")), 0.0),
            **self._counts,
        }
        return ("\n\n" if closed else f"{CLOSE}\n\n"), 0.0, False, False, info

    def _search(self, call: ToolCall, info: dict[str, Any]) -> tuple[str, Charges]:
        self._counts["n_searches"] += 1
        info["query"] = call.arguments["query"]
        self._writing = True
        return f"\n\n{OPEN}", self.rewards.charges(1, 0)

    def _answer(self, call: ToolCall, info: dict[str, Any]) -> tuple[str, float, float, Charges]:
        observation, outcome, fmt, charges = super()._answer(call, info)
        if self._answer_tags > MAX_ANSWER_TAGS:  # SSRL: answer-tag spam cuts the outcome by 4x
            outcome /= 4
        info["answer_tags"] = self._answer_tags
        return observation, outcome, fmt, charges
