"""`TextEnv`: what `SearchEnv`, `WebEnv` and `PlannerEnv` share, and `SharedGeneratorSpec`.

A `TextEnv` picks a task at ``reset``, shows the protocol's instructions, and at each ``step``
parses the agent's text into one tool call, runs it through the env's `_call` and reports the
values of its rubric's step terms (``reward_components``) and the episode's counters in ``info``;
its reward is their weighted sum (`searchgym.envs.rubric.Rubric`, ``env.rubric``). An env declares
its `_counters`, starts its own per-episode state in `_new_episode`, runs its tools in `_call`, and
says what a correct answer is charged with ``cost_only_if_correct`` (`_episode_charges`) and how
much of the evidence the agent saw (`_evidence_recall`).
`RetrieverEnv` adds the ``search`` tool over a `Retriever` that `SearchEnv` and `PlannerEnv` use.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
from gymnasium.envs.registration import EnvSpec

from searchgym.envs.observations import count_tokens, format_docs, truncate_tokens
from searchgym.envs.protocols import ActionProtocol
from searchgym.envs.rewards import RewardWeights, format_reward, outcome_reward, usage
from searchgym.envs.spaces import UnicodeText
from searchgym.envs.tools import Invalid, ToolCall
from searchgym.errors import RetrieverError
from searchgym.retrievers.base import ContextualRetriever, Retriever, SearchContext, clean_text, is_clean
from searchgym.tasks.metrics import score_answer
from searchgym.tasks.task import Task

MAX_OBSERVATION_CHARS = 10_000_000
WORLD_FAILURES = (RetrieverError, TimeoutError, ConnectionError)
"""Failures of the world a tool reaches: shown to the agent and counted, never raised."""
SHARED_KWARGS = ("generator",)
Charges = dict[str, float]
"""The cost terms' values a step is charged (``{"search_calls": 1.0, "obs_tokens_1k": 0.2}``)."""


class TextEnv(gym.Env[str, str]):
    """Text in, text out: a task per episode, one tool call per step (see the module docstring)."""

    metadata = {"render_modes": []}
    _counters: tuple[str, ...] = ("n_searches", "n_invalid", "n_extra_calls", "n_errors", "obs_tokens")
    """The episode's counters, reported in every ``info`` in this order."""

    def __init__(self, tasks: Sequence[Task], protocol: ActionProtocol, rewards: RewardWeights) -> None:
        self.tasks = tasks
        self.protocol = protocol
        self.rewards = rewards
        self.rubric = rewards.rubric()
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
        self._counts = dict.fromkeys(self._counters, 0)
        self._new_episode()
        info = {
            "task": self._task,
            "task_id": self._task.id,
            "question": self._task.question,
            "protocol": self.protocol,
            "turn": 0,
            **self._info_counts(),
        }
        return self.protocol.instructions(self._task.question), info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """One turn. Any string is a valid action: text that is no call is an invalid turn (counted
        in ``n_invalid``, never a search), and a call's arguments reach its tool through
        `clean_text`, the one place where the agent's text meets a retriever, a web page source or
        the scorer. A tool that fails as the world fails (`WORLD_FAILURES`) still took its turn:
        a failed search counts as a search and an error. A step that raises (a bug, never the
        agent's text) did not happen: the turn, the counters and the episode stay as they were."""
        self._begin_turn(action)
        before = self._turn - 1, dict(self._counts), self._done
        try:
            return self._step(action)
        except BaseException:
            self._turn, self._counts, self._done = before
            raise

    def _step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        parsed = self.protocol.parse(action)
        info: dict[str, Any] = {"turn": self._turn, "tool": None, "error": None}
        outcome = fmt = 0.0
        charges = self._turn_charges()
        if isinstance(parsed, Invalid):
            self._counts["n_invalid"] += 1
            info["error"] = parsed.reason
            observation = self.protocol.format_error(parsed.reason)
        else:
            parsed = _cleaned(parsed)
            info["tool"] = parsed.name
            self._counts["n_extra_calls"] += parsed.extra_calls
            observation, outcome, fmt, call_charges = self._call(parsed, info)
            charges = add_charges(charges, call_charges)
        return observation, self._reward(outcome, fmt, charges, info), self._done, False, info

    def close(self) -> None:
        """Closing is idempotent; what the env was given (retriever, generator) is shared and stays open."""
        self._done = True

    # -- hooks -------------------------------------------------------------------------------
    def _new_episode(self) -> None:
        """Start the env's own per-episode state (the task, turn and counters are set)."""

    def _call(self, call: ToolCall, info: dict[str, Any]) -> tuple[str, float, float, Charges]:
        """Run one tool call: the step's observation, outcome, format and charges."""
        raise NotImplementedError

    def _turn_charges(self) -> Charges:
        """What a turn of any kind is charged, on top of its tool's charges."""
        return {}

    def _episode_charges(self) -> Charges:
        """With ``cost_only_if_correct``: what the episode is charged at a correct answer."""
        raise NotImplementedError

    def _evidence_recall(self) -> float | None:
        """The share of the task's evidence the agent was shown; None when that is unknown."""
        raise NotImplementedError

    def _info_counts(self) -> dict[str, Any]:
        """The counters every ``info`` carries."""
        return dict(self._counts)

    # -- shared steps ------------------------------------------------------------------------
    def _require_episode(self) -> None:
        if self._task is None or self._done:
            raise RuntimeError("the episode is over or was never started; call reset() first")

    def _begin_turn(self, action: str) -> None:
        """Check that ``action`` may be taken now and count the turn."""
        self._require_episode()
        if not isinstance(action, str):
            raise TypeError(f"actions are text (str), got {type(action).__name__}")
        self._turn += 1

    def _result(self, text: str, n_calls: int, info: dict[str, Any]) -> tuple[str, Charges]:
        """The observation that shows a tool's ``text`` (as `clean_text`: a document may hold what
        the agent's tokenizer cannot take), and its charges: ``n_calls`` calls that reached the
        world and the observation's tokens (none now with ``cost_only_if_correct``)."""
        observation = self.protocol.format_result(clean_text(text))
        tokens = count_tokens(observation)
        self._counts["obs_tokens"] += tokens
        info["step_obs_tokens"] = tokens
        return observation, self.rewards.charges(n_calls, tokens)

    def _score_answer(
        self, prediction: str, info: dict[str, Any], *, format_score: bool = True
    ) -> tuple[float, float, Charges]:
        """End the episode on the answer ``prediction``: (outcome, format, charges now), with
        the answer's scores in ``info``. Without ``format_score`` the format component is 0."""
        assert self._task is not None
        scores = score_answer(prediction, self._task.answers)
        outcome = outcome_reward(prediction, self._task.answers, self.rewards.outcome_metric)
        fmt = format_reward(self._counts["n_invalid"], self._counts["n_extra_calls"]) if format_score else 0.0
        charges = {}
        if self.rewards.cost_only_if_correct and scores.em == 1.0:
            charges = self._episode_charges()
        info.update(
            prediction=prediction,
            em=scores.em,
            f1=scores.f1,
            cover_em=scores.cover_em,
            evidence_recall=self._evidence_recall(),
        )
        self._done = True
        return outcome, fmt, charges

    def _reward(self, outcome: float, fmt: float, charges: Charges, info: dict[str, Any]) -> float:
        """Record the step terms' values (``reward_components``) and the counters in ``info``;
        the rubric's weighted sum of the values."""
        values = self._step_values(outcome, fmt, charges)
        info["reward_components"] = values
        info.update(self._info_counts())
        return self.rubric.total(values)

    def _step_values(self, outcome: float, fmt: float, charges: Charges) -> dict[str, float]:
        """Every step term's value, in the rubric's order (0 for a cost not charged)."""
        values = {t.name: charges.get(t.name, 0.0) for t in self.rubric.at("step")}
        return values | {"outcome": outcome, "format": fmt}

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


def add_charges(a: Charges, b: Charges) -> Charges:
    """Two steps' charges together.

    >>> add_charges({"turns": 1.0}, {"turns": 1.0, "search_calls": 1.0})
    {'turns': 2.0, 'search_calls': 1.0}
    """
    return {name: a.get(name, 0.0) + b.get(name, 0.0) for name in {**a, **b}}


def _cleaned(call: ToolCall) -> ToolCall:
    """``call`` with its text arguments passed through `clean_text` (the same call when clean)."""
    if all(is_clean(v) for v in call.arguments.values() if isinstance(v, str)):
        return call
    arguments = {k: clean_text(v) if isinstance(v, str) else v for k, v in call.arguments.items()}
    return dataclasses.replace(call, arguments=arguments)


class RetrieverEnv(TextEnv):
    """A `TextEnv` whose ``search`` tool returns the ``top_k`` documents of ``retriever``, cut to
    ``max_obs_tokens``; evidence recall is the share of the task's evidence ids retrieved."""

    def __init__(
        self,
        tasks: Sequence[Task],
        retriever: Retriever,
        protocol: ActionProtocol,
        rewards: RewardWeights,
        *,
        top_k: int,
        max_obs_tokens: int,
    ) -> None:
        super().__init__(tasks, protocol, rewards)
        self.retriever = retriever
        self.top_k = top_k
        self.max_obs_tokens = max_obs_tokens

    def _new_episode(self) -> None:
        self._retrieved: set[str] = set()
        self._shown_titles: dict[str, set[str]] = {}  # the ids of the passages shown under a title
        self._searches: list[tuple[str, str]] = []  # each search's query and the text it showed

    def _search(self, call: ToolCall, info: dict[str, Any]) -> tuple[str, Charges]:
        assert self._task is not None
        query = call.arguments["query"]
        self._counts["n_searches"] += 1
        info["query"] = query
        try:
            if isinstance(self.retriever, ContextualRetriever):
                context = SearchContext(self._task.question, tuple(self._task.answers))
                docs = self.retriever.search_in_context(query, self.top_k, context)
            else:
                docs = self.retriever.search(query, self.top_k)
        except WORLD_FAILURES as e:
            self._counts["n_errors"] += 1
            info["error"] = f"search failed: {e}"
            text = f"Search failed ({type(e).__name__}: {e}). You may retry or search differently."
            docs = []
        else:
            text = truncate_tokens(format_docs(docs), self.max_obs_tokens)
        self._searches.append((query, text))
        self._retrieved.update(d.id for d in docs)
        for d in docs:
            self._shown_titles.setdefault(d.title, set()).add(d.id)
        info["doc_ids"] = [d.id for d in docs]
        return self._result(text, 1, info)

    def _episode_charges(self) -> Charges:
        return usage(self._counts["n_searches"], self._counts["obs_tokens"])

    def _evidence_recall(self) -> float | None:
        assert self._task is not None
        evidence = set(self._task.evidence)
        return len(evidence & self._retrieved) / len(evidence) if evidence else None


class _SharedKwargs(dict):
    """An env spec's keyword arguments: deep-copied as a dict is, except `SHARED_KWARGS`."""

    def __deepcopy__(self, memo: dict[int, Any]) -> _SharedKwargs:
        return _SharedKwargs(
            {k: v if k in SHARED_KWARGS else copy.deepcopy(v, memo) for k, v in self.items()}
        )


class SharedGeneratorSpec:
    """Mixin (before the env class) for an env made with a live ``generator`` (a loaded model).

    Gymnasium keeps make's keyword arguments in ``env.spec``, and its wrappers deep-copy that
    spec: a model would be copied once per env made, and a generator that holds a lock or a
    connection would make ``make`` fail. This keeps `SHARED_KWARGS` in the spec by reference
    instead, so ``gymnasium.make(env.spec)`` makes another env on the same model.
    """

    _spec: EnvSpec | None = None

    @property
    def spec(self) -> EnvSpec | None:
        return self._spec

    @spec.setter
    def spec(self, spec: EnvSpec | None) -> None:
        if spec is not None and any(k in spec.kwargs for k in SHARED_KWARGS):
            spec = dataclasses.replace(spec, kwargs=_SharedKwargs(spec.kwargs))
        self._spec = spec
