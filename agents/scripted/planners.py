"""Scripted planners for `PlannerEnv` (``searchgym/FictionalQA-Planner-v0``): fixed search plans
that trace the accuracy-vs-cost trade-off a trained planner should beat or match.

- `FixedPlanner(k)`: the gold chain's first ``k`` hop queries (``metadata["chain"][i]["query"]``;
  the question once on tasks without a chain), then ``finish``. ``k = 0`` never searches.
- `QuestionPlanner`: searches the question as asked, once, then finishes (naive RAG).

They write actions in the env's protocol and end with the protocol's tool that takes no argument
(``finish``), so they run on any planner env; on an env with an ``answer`` tool they answer
``unknown`` instead, which scores nothing.
"""

from __future__ import annotations

from typing import Any

from searchgym.agents.scripted.baselines import _Scripted


class FixedPlanner(_Scripted):
    """Search the first ``k`` hops of the gold chain, then finish."""

    def __init__(self, k: int) -> None:
        if k < 0:
            raise ValueError(f"k is a number of searches and must be >= 0, got {k}")
        self.k = k

    def reset(self, info: dict[str, Any]) -> None:
        super().reset(info)
        chain = self.task.metadata.get("chain") or []
        queries = [hop["query"] for hop in chain if hop.get("query")] or [self.task.question]
        self.queries = queries[: self.k]

    def act(self, observation: str) -> str:
        self.turn += 1
        if self.turn <= len(self.queries):
            query = self.queries[self.turn - 1]
            return self._say(f"Hop {self.turn}: {query}.", "search", query)
        return self._conclude(f"I searched {len(self.queries)} hop(s); that is my budget.", "unknown")


class NoSearchPlanner(FixedPlanner):
    """Finish at once: the generator answers from nothing (its prior knowledge)."""

    def __init__(self) -> None:
        super().__init__(0)


class QuestionPlanner(_Scripted):
    """Search the question once, then finish."""

    def act(self, observation: str) -> str:
        self.turn += 1
        if self.turn == 1:
            return self._say("Let me search the question.", "search", self.task.question)
        return self._conclude("One search is enough.", "unknown")
