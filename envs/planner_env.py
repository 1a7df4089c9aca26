"""`PlannerEnv`: a trainable planner searches, a frozen generator answers (AI-SearchPlanner).

AI-SearchPlanner (Mei et al., 2025, arXiv 2508.20368) splits a search agent in two: a small
trainable planner that issues sub-queries and decides when to stop, and a large frozen generator
(any LLM) that answers from what the planner gathered. The planner is trained with RL on the
utility of the plan (an outcome reward on the generator's answer, plus a process reward on the
planning trajectory) against its cost (planning turns and search calls); sweeping the weight of
the cost traces an accuracy-vs-cost Pareto front.

Here the planner has two tools: ``search(query)`` and ``finish()``, which takes no argument (the
planner never answers; a note to the generator would let it answer anyway). At ``finish`` the
generator, any `searchgym.generation.TextGenerator`, answers from the question and every search
result the planner was shown (prompt: `searchgym.envs.reader.generator_prompt`); the answer is
the reply's ``<answer>…</answer>`` or the whole reply (`searchgym.envs.reader.parse_reply`).
Rewards per step, with weights in `PlannerRewards` (`RewardWeights` plus ``per_turn``):

- every turn (search, finish or an invalid action) costs ``per_turn``; a search also costs
  ``per_search + per_1k_obs_tokens * tokens / 1000`` (with ``cost_only_if_correct`` the whole
  `plan_cost` is charged at the end instead, and only when the answer is exactly right);
- ``finish`` earns ``outcome * metric(generator's answer) + format * format_score``.

The turn limit is `PlannerTurnLimit`: a planner that runs out of turns still gets the
generator's answer from what it found (outcome counted, no format score: it never finished). A
generator failure at ``finish`` (`PolicyError`, timeout, lost connection) is shown to the planner
and counted in ``n_errors``; the episode goes on, so it may finish again.

Differences from the paper, by design: the outcome is exact match / F1 / cover-EM against the
gold answers, not an LLM judge's score relative to no-search and naive-RAG baselines; there is no
process reward from a judge (the format score stands in for a well-formed plan); the cost is a
linear penalty per query and per turn, so a sweep over its weight can score one evaluation at
every weight (`searchgym.sweep`); the generator sees the queries and results but not the
planner's reasoning; training uses GRPO (`searchgym.agents.grpo`), not PPO; and the generator is
called once per finished episode, not batched across environments.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
from gymnasium.envs.registration import EnvSpec

from searchgym.envs.observations import count_tokens, format_docs, truncate_tokens
from searchgym.envs.protocols import ActionProtocol, make_protocol
from searchgym.envs.reader import generator_prompt, parse_reply
from searchgym.envs.rewards import RewardWeights, combine, format_reward, outcome_reward, search_cost
from searchgym.envs.search_env import MAX_OBSERVATION_CHARS
from searchgym.envs.simulated import SHARED_KWARGS, _SharedKwargs
from searchgym.envs.spaces import UnicodeText
from searchgym.envs.tools import SEARCH, Invalid, Tool, ToolCall
from searchgym.envs.wrappers import TurnLimit
from searchgym.errors import ConfigError, PolicyError, RetrieverError
from searchgym.generation import SamplingParams, TextGenerator
from searchgym.retrievers.base import ContextualRetriever, Retriever, SearchContext
from searchgym.tasks.metrics import score_answer
from searchgym.tasks.task import Task

FINISH = Tool(
    "finish",
    "Stop searching: another model then answers the question from the search results gathered so "
    "far. This ends the episode.",
    (),
)
GOAL = (
    "Plan the searches needed to answer the given question. You do not answer it yourself: when "
    "you finish, another model answers it from the search results you gathered."
)
GENERATOR_PARAMS = SamplingParams(max_new_tokens=64, temperature=0.0, stop=("</answer>",))
_SEARCH_FAILURES = (RetrieverError, TimeoutError, ConnectionError)
_GENERATOR_FAILURES = (PolicyError, TimeoutError, ConnectionError)


@dataclass(frozen=True)
class PlannerRewards(RewardWeights):
    """`RewardWeights` plus the cost of a planning turn."""

    per_turn: float = 0.0
    """Cost of one planning turn: a search, an invalid action or finish (λ_turn)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.per_turn < 0:
            raise ConfigError(f"per_turn is a cost and must be >= 0, got {self.per_turn}")


def plan_cost(n_searches: int, n_turns: int, obs_tokens: int, weights: PlannerRewards) -> float:
    """The (positive) cost of a plan of ``n_turns`` turns with ``n_searches`` searches that
    showed ``obs_tokens`` tokens.

    >>> plan_cost(2, 3, 0, PlannerRewards(per_search=0.1, per_turn=0.05))
    0.35000000000000003
    """
    return search_cost(n_searches, obs_tokens, weights) + weights.per_turn * n_turns


def planner_rewards(rewards: RewardWeights | None) -> PlannerRewards:
    """``rewards`` as `PlannerRewards` (plain `RewardWeights` charge nothing per turn)."""
    if rewards is None or isinstance(rewards, PlannerRewards):
        return rewards or PlannerRewards()
    return PlannerRewards(**dataclasses.asdict(rewards))


class PlannerEnv(gym.Env[str, str]):
    """A question, a search tool over ``retriever`` and ``finish``, after which ``generator``
    answers from the search results (see the module docstring).

    ``info`` carries what `SearchEnv`'s does (reward components, ``n_searches``, ``n_invalid``,
    ``n_extra_calls``, ``n_errors``, ``obs_tokens``, the step's ``tool`` and ``error``) plus
    ``n_turns`` and ``episode_cost`` (the cost charged so far); the step where the generator
    answers adds ``prediction``, ``em``, ``f1``, ``cover_em``, ``evidence_recall`` and
    ``generator_reply`` (its raw text). ``env.spec`` shares the generator rather than copying it
    (as `SimulatedSearchEnv` does), so ``gymnasium.make(env.spec)`` uses the same model.
    """

    metadata = {"render_modes": []}
    _spec: EnvSpec | None = None

    def __init__(
        self,
        tasks: Sequence[Task],
        retriever: Retriever,
        generator: TextGenerator,
        *,
        protocol: str | ActionProtocol = "tags",
        top_k: int = 3,
        max_obs_tokens: int = 512,
        rewards: RewardWeights | None = None,
        generator_params: SamplingParams = GENERATOR_PARAMS,
    ) -> None:
        if not tasks:
            raise ValueError("PlannerEnv needs at least one task")
        if top_k < 1 or max_obs_tokens < 1:
            raise ValueError(f"top_k and max_obs_tokens must be positive, got {top_k}, {max_obs_tokens}")
        if not isinstance(generator, TextGenerator):
            raise ConfigError(
                f"the generator must have chat(conversations, params) (a searchgym TextGenerator, e.g. a "
                f"policy or searchgym.envs.reader.ExtractiveReader()); got {type(generator).__name__}"
            )
        self.tasks = tasks
        self.retriever = retriever
        self.generator = generator
        self.generator_params = generator_params
        if isinstance(protocol, str):
            protocol = make_protocol(protocol, (SEARCH, FINISH), goal=GOAL)
        names = {t.name for t in protocol.tools}
        if names != {"search", "finish"}:
            raise ValueError(f"PlannerEnv's protocol needs the tools search and finish, got {sorted(names)}")
        self.protocol = protocol
        self.top_k = top_k
        self.max_obs_tokens = max_obs_tokens
        self.rewards = planner_rewards(rewards)
        self.action_space = UnicodeText(self.protocol.max_chars)
        self.observation_space = UnicodeText(MAX_OBSERVATION_CHARS)
        self._task: Task | None = None
        self._done = True

    @property  # type: ignore[override]  (gymnasium.Env declares spec as a plain attribute)
    def spec(self) -> EnvSpec | None:
        return self._spec

    @spec.setter
    def spec(self, spec: EnvSpec | None) -> None:
        if spec is not None and any(k in spec.kwargs for k in SHARED_KWARGS):
            spec = dataclasses.replace(spec, kwargs=_SharedKwargs(spec.kwargs))
        self._spec = spec

    # -- Gymnasium API -----------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self._task = self._pick_task(options or {})
        self._done = False
        self._turn = 0
        self._cost = 0.0
        self._counts = dict(n_searches=0, n_invalid=0, n_extra_calls=0, n_errors=0, obs_tokens=0)
        self._searches: list[tuple[str, str]] = []
        self._retrieved: set[str] = set()
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
        if self._task is None or self._done:
            raise RuntimeError("the episode is over or was never started; call reset() first")
        if not isinstance(action, str):
            raise TypeError(f"actions are text (str), got {type(action).__name__}")
        self._turn += 1
        parsed = self.protocol.parse(action)
        info: dict[str, Any] = {"turn": self._turn, "tool": None, "error": None}
        outcome = fmt = 0.0
        cost = 0.0 if self.rewards.cost_only_if_correct else self.rewards.per_turn
        observation = ""
        if isinstance(parsed, Invalid):
            self._counts["n_invalid"] += 1
            info["error"] = parsed.reason
            observation = self.protocol.format_error(parsed.reason)
        else:
            info["tool"] = parsed.name
            self._counts["n_extra_calls"] += parsed.extra_calls
            if parsed.name == "search":
                observation, search = self._search(parsed, info)
                cost += search
            else:
                answered = self._answer(info, finished=True)
                if answered is None:
                    observation = self.protocol.format_result(
                        f"The answering model failed ({info['error']}). You may finish again or search more."
                    )
                else:
                    outcome, fmt, cost_at_end = answered
                    cost += cost_at_end
        return observation, self._reward(outcome, fmt, cost, info), self._done, False, info

    def answer_now(self) -> tuple[float, dict[str, Any]]:
        """End an episode the planner did not finish (at the turn limit): the generator answers
        from the results gathered so far, with no format score. Returns the reward and the info
        entries of that answer (none but the error and counts when the generator fails)."""
        if self._task is None or self._done:
            raise RuntimeError("the episode is over or was never started; call reset() first")
        info: dict[str, Any] = {"error": None}
        answered = self._answer(info, finished=False)
        self._done = True
        outcome, fmt, cost = answered if answered is not None else (0.0, 0.0, 0.0)
        return self._reward(outcome, fmt, cost, info), info

    # -- tools -------------------------------------------------------------------------------
    def _search(self, call: ToolCall, info: dict[str, Any]) -> tuple[str, float]:
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
        except _SEARCH_FAILURES as e:
            self._counts["n_errors"] += 1
            info["error"] = f"search failed: {e}"
            text = f"Search failed ({type(e).__name__}: {e}). You may retry or search differently."
            docs = []
        else:
            text = truncate_tokens(format_docs(docs), self.max_obs_tokens)
        self._searches.append((query, text))
        observation = self.protocol.format_result(text)
        tokens = count_tokens(observation)
        self._counts["obs_tokens"] += tokens
        self._retrieved.update(d.id for d in docs)
        info["doc_ids"] = [d.id for d in docs]
        info["step_obs_tokens"] = tokens
        cost = 0.0 if self.rewards.cost_only_if_correct else search_cost(1, tokens, self.rewards)
        return observation, cost

    def _answer(self, info: dict[str, Any], *, finished: bool) -> tuple[float, float, float] | None:
        """The generator answers; returns (outcome, format, cost charged now), or None (with
        ``info["error"]`` set) when the generator fails."""
        assert self._task is not None
        prompt = generator_prompt(self._task.question, self._searches)
        try:
            completions = self.generator.chat([[{"role": "user", "content": prompt}]], self.generator_params)
        except _GENERATOR_FAILURES as e:
            self._counts["n_errors"] += 1
            info["error"] = f"the generator failed: {type(e).__name__}: {e}"
            return None
        if len(completions) != 1:
            raise ValueError(f"the generator returned {len(completions)} completions for one conversation")
        reply = completions[0].text
        prediction = parse_reply(reply)
        scores = score_answer(prediction, self._task.answers)
        outcome = outcome_reward(prediction, self._task.answers, self.rewards.outcome_metric)
        fmt = format_reward(self._counts["n_invalid"], self._counts["n_extra_calls"]) if finished else 0.0
        cost = 0.0
        if self.rewards.cost_only_if_correct and scores.em == 1.0:
            cost = plan_cost(self._counts["n_searches"], self._turn, self._counts["obs_tokens"], self.rewards)
        evidence = set(self._task.evidence)
        info.update(
            prediction=prediction,
            em=scores.em,
            f1=scores.f1,
            cover_em=scores.cover_em,
            evidence_recall=len(evidence & self._retrieved) / len(evidence) if evidence else None,
            generator_reply=reply,
        )
        self._done = True
        return outcome, fmt, cost

    def _reward(self, outcome: float, fmt: float, cost: float, info: dict[str, Any]) -> float:
        """Record the components and counters in ``info``; the weighted reward."""
        self._cost += cost
        info["reward_components"] = {"outcome": outcome, "format": fmt, "cost": cost}
        info.update(self._info_counts())
        return combine(outcome, fmt, cost, self.rewards)

    def _info_counts(self) -> dict[str, Any]:
        return {**self._counts, "n_turns": self._turn, "episode_cost": self._cost}

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
        """Closing is idempotent; the retriever and the generator are shared and stay open."""
        self._done = True


class PlannerTurnLimit(TurnLimit):
    """`TurnLimit` for a `PlannerEnv`: when it truncates an episode, the generator still answers
    from the results gathered so far (`PlannerEnv.answer_now`), so a planner that runs out of
    turns is judged on what it found; its reward and info entries join the last step's."""

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, info = super().step(action)
        if truncated:
            extra, more = self.env.unwrapped.answer_now()
            components = info["reward_components"]
            for name, value in more.pop("reward_components").items():
                components[name] += value
            errors = [info["error"], more.pop("error")]
            info.update(more)
            info["error"] = "; ".join(e for e in errors if e) or None
            reward += extra
        return observation, reward, terminated, truncated, info
