"""`SearchEnv`: answer a question with a search tool over any retriever."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym

from searchgym.envs.observations import count_tokens, format_docs, truncate_tokens
from searchgym.envs.protocols import ActionProtocol, make_protocol
from searchgym.envs.rewards import (
    RewardWeights,
    combine,
    format_reward,
    outcome_reward,
    search_cost,
)
from searchgym.envs.spaces import UnicodeText
from searchgym.envs.tools import Invalid, ToolCall
from searchgym.errors import RetrieverError
from searchgym.retrievers.base import ContextualRetriever, Retriever, SearchContext
from searchgym.tasks.metrics import score_answer
from searchgym.tasks.task import Task

MAX_OBSERVATION_CHARS = 10_000_000
_WORLD_FAILURES = (RetrieverError, TimeoutError, ConnectionError)


class SearchEnv(gym.Env[str, str]):
    """A question, a search tool over ``retriever`` and an answer tool.

    Observations and actions are text. ``reset`` shows the instructions and the question;
    each ``step`` takes the agent's text, parses one tool call with the action protocol and
    returns the tool's result. The episode terminates when the agent answers; turn limits
    are applied by Gymnasium's ``TimeLimit`` (``max_episode_steps`` at registration).

    Every ``info`` carries the step's reward components (``outcome``, ``format``, ``cost``),
    the episode's counters (``n_searches``, ``n_invalid``, ``n_extra_calls``, ``n_errors``,
    ``obs_tokens``) and the step's ``tool`` and ``error``; the answer step adds ``prediction``,
    ``em``, ``f1``, ``cover_em`` and ``evidence_recall``.
    """

    metadata = {"render_modes": []}

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
            raise ValueError("SearchEnv needs at least one task")
        if top_k < 1 or max_obs_tokens < 1:
            raise ValueError(f"top_k and max_obs_tokens must be positive, got {top_k}, {max_obs_tokens}")
        self.tasks = tasks
        self.retriever = retriever
        self.protocol = make_protocol(protocol) if isinstance(protocol, str) else protocol
        unsupported = {t.name for t in self.protocol.tools} - {"search", "answer"}
        if unsupported:
            raise ValueError(f"SearchEnv has no handler for tool(s) {sorted(unsupported)}")
        self.top_k = top_k
        self.max_obs_tokens = max_obs_tokens
        self.rewards = rewards or RewardWeights()
        self.action_space = UnicodeText(self.protocol.max_chars)
        self.observation_space = UnicodeText(MAX_OBSERVATION_CHARS)
        self._task: Task | None = None
        self._done = True

    # -- Gymnasium API -----------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self._task = self._pick_task(options or {})
        self._done = False
        self._turn = 0
        self._counts = dict(n_searches=0, n_invalid=0, n_extra_calls=0, n_errors=0, obs_tokens=0)
        self._retrieved: set[str] = set()
        observation = self.protocol.instructions(self._task.question)
        info = {
            "task": self._task,
            "task_id": self._task.id,
            "question": self._task.question,
            "protocol": self.protocol,
            "turn": 0,
            **self._counts,
        }
        return observation, info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self._task is None or self._done:
            raise RuntimeError("the episode is over or was never started; call reset() first")
        if not isinstance(action, str):
            raise TypeError(f"actions are text (str), got {type(action).__name__}")
        self._turn += 1
        parsed = self.protocol.parse(action)
        info: dict[str, Any] = {"turn": self._turn, "tool": None, "error": None}
        outcome = fmt = cost = 0.0
        if isinstance(parsed, Invalid):
            self._counts["n_invalid"] += 1
            info["error"] = parsed.reason
            observation = self.protocol.format_error(parsed.reason)
        else:
            info["tool"] = parsed.name
            self._counts["n_extra_calls"] += parsed.extra_calls
            if parsed.name == "search":
                observation, cost = self._search(parsed, info)
            else:
                observation, outcome, fmt, cost = self._answer(parsed, info)
        info["reward_components"] = {"outcome": outcome, "format": fmt, "cost": cost}
        info.update(self._counts)
        reward = combine(outcome, fmt, cost, self.rewards)
        return observation, reward, self._done, False, info

    # -- tools -------------------------------------------------------------------------------
    def _search(self, call: ToolCall, info: dict[str, Any]) -> tuple[str, float]:
        query = call.arguments["query"]
        self._counts["n_searches"] += 1
        info["query"] = query
        try:
            if isinstance(self.retriever, ContextualRetriever):
                context = SearchContext(self._task.question, tuple(self._task.answers))
                docs = self.retriever.search_in_context(query, self.top_k, context)
            else:
                docs = self.retriever.search(query, self.top_k)
        except _WORLD_FAILURES as e:
            self._counts["n_errors"] += 1
            info["error"] = f"search failed: {e}"
            text = f"Search failed ({type(e).__name__}: {e}). You may retry or search differently."
            docs = []
        else:
            text = truncate_tokens(format_docs(docs), self.max_obs_tokens)
        observation = self.protocol.format_result(text)
        tokens = count_tokens(observation)
        self._counts["obs_tokens"] += tokens
        self._retrieved.update(d.id for d in docs)
        info["doc_ids"] = [d.id for d in docs]
        info["step_obs_tokens"] = tokens
        cost = 0.0 if self.rewards.cost_only_if_correct else search_cost(1, tokens, self.rewards)
        return observation, cost

    def _answer(self, call: ToolCall, info: dict[str, Any]) -> tuple[str, float, float, float]:
        assert self._task is not None
        prediction = call.arguments["answer"]
        scores = score_answer(prediction, self._task.answers)
        outcome = outcome_reward(prediction, self._task.answers, self.rewards.outcome_metric)
        fmt = format_reward(self._counts["n_invalid"], self._counts["n_extra_calls"])
        cost = 0.0
        if self.rewards.cost_only_if_correct and scores.em == 1.0:
            cost = search_cost(self._counts["n_searches"], self._counts["obs_tokens"], self.rewards)
        evidence = set(self._task.evidence)
        info.update(
            prediction=prediction,
            em=scores.em,
            f1=scores.f1,
            cover_em=scores.cover_em,
            evidence_recall=len(evidence & self._retrieved) / len(evidence) if evidence else None,
        )
        self._done = True
        return "", outcome, fmt, cost

    def _pick_task(self, options: dict[str, Any]) -> Task:
        unknown = set(options) - {"task", "task_index"}
        if unknown:
            raise ValueError(f"unknown reset option(s) {sorted(unknown)}; use 'task' or 'task_index'")
        if "task" in options:
            task = options["task"]
            if not isinstance(task, Task):
                raise TypeError(f"options['task'] must be a Task, got {type(task).__name__}")
            return task
        if "task_index" in options:
            return self.tasks[options["task_index"]]
        return self.tasks[int(self.np_random.integers(len(self.tasks)))]

    def close(self) -> None:
        """Closing is idempotent; the retriever is shared and stays open."""
        self._done = True
