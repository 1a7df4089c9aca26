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
Rewards per step, with weights in `PlannerRewards` (`RewardWeights` plus ``per_turn``, the
weight of the rubric's ``turns`` term):

- every turn (search, finish or an invalid action) is charged one of ``turns``; a search also
  charges ``search_calls`` and ``obs_tokens_1k``, as in `SearchEnv` (with ``cost_only_if_correct``
  the whole plan is charged at the end instead, and only when the answer is exactly right);
- ``finish`` earns ``outcome * metric(generator's answer) + format * format_score``, and with
  ``beyond_rag`` s3's gain beyond RAG (Jiang et al. 2025, arXiv 2505.14146): the metric of the
  generator's answer from the plan's results less that of its answer from naive retrieval (the
  question's own ``top_k`` results), both read by the same frozen generator; the naive answer's
  score is computed once per task and kept.

The turn limit is `PlannerTurnLimit`: a planner that runs out of turns still gets the
generator's answer from what it found (outcome counted, no format score: it never finished). A
generator failure at ``finish`` (`PolicyError`, timeout, lost connection) is shown to the planner
and counted in ``n_errors``; the episode goes on, so it may finish again.

Differences from the paper, by design: the outcome is exact match / F1 / cover-EM against the
gold answers, not an LLM judge's score relative to no-search and naive-RAG baselines; there is no
process reward from a judge (the format score stands in for a well-formed plan); the cost is a
linear penalty per query and per turn, so a sweep over its weight can score one evaluation at
every weight (`searchgym.sweep`); the generator sees the queries and results but not the
planner's reasoning; training uses GRPO (`searchgym.agents.train.grpo`), not PPO; and the generator is
called once per finished episode, not batched across environments.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from searchgym.config_types import check_int
from searchgym.envs.observations import format_docs, truncate_tokens
from searchgym.envs.protocols import ActionProtocol, make_protocol
from searchgym.envs.reader import generator_prompt, parse_reply
from searchgym.envs.rewards import RewardWeights, outcome_reward, usage
from searchgym.envs.rubric import Term
from searchgym.envs.text_env import WORLD_FAILURES, Charges, RetrieverEnv, SharedGeneratorSpec
from searchgym.envs.tools import SEARCH, Tool, ToolCall
from searchgym.envs.wrappers import TurnLimit
from searchgym.errors import ConfigError, PolicyError, RetrieverError
from searchgym.generation import SamplingParams, TextGenerator
from searchgym.retrievers.base import Retriever, clean_text
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
_GENERATOR_FAILURES = (PolicyError, TimeoutError, ConnectionError)


@dataclass(frozen=True)
class PlannerRewards(RewardWeights):
    """`RewardWeights` plus the cost of a planning turn."""

    per_turn: float = 0.0
    """Cost of one planning turn: a search, an invalid action or finish (λ_turn)."""
    beyond_rag: float = 0.0
    """Weight of s3's gain beyond RAG: the answer's score from the plan's results less its score
    from naive retrieval of the question (0: not computed, no extra generator call)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.per_turn < 0:
            raise ConfigError(f"per_turn is a cost and must be >= 0, got {self.per_turn}")
        if self.beyond_rag < 0:
            raise ConfigError(f"beyond_rag weighs a gain and must be >= 0, got {self.beyond_rag}")

    def step_terms(self) -> tuple[Term, ...]:
        turns = Term(
            "turns",
            -self.per_turn or 0.0,
            doc="planning turns charged (the planner envs); weight -rewards.per_turn",
        )
        gain = Term(
            "beyond_rag",
            float(self.beyond_rag),
            doc="s3's gain beyond RAG (the planner envs): the answer's score from the plan's results "
            "less its score from naive retrieval of the question; weight rewards.beyond_rag",
        )
        return (*super().step_terms(), turns, *([gain] if self.beyond_rag else []))


def plan_charges(n_searches: int, n_turns: int, obs_tokens: int) -> Charges:
    """What a plan of ``n_turns`` turns with ``n_searches`` searches that showed ``obs_tokens``
    tokens is charged.

    >>> plan = plan_charges(2, 3, 0)
    >>> plan, PlannerRewards(per_search=0.1, per_turn=0.05).rubric().cost(plan)
    ({'search_calls': 2.0, 'obs_tokens_1k': 0.0, 'turns': 3.0}, 0.35000000000000003)
    """
    return usage(n_searches, obs_tokens) | {"turns": float(n_turns)}


class PlannerEnv(SharedGeneratorSpec, RetrieverEnv):
    """A question, a search tool over ``retriever`` and ``finish``, after which ``generator``
    answers from the search results (see the module docstring).

    ``info`` carries what `SearchEnv`'s does (reward components, ``n_searches``, ``n_invalid``,
    ``n_extra_calls``, ``n_errors``, ``obs_tokens``, the step's ``tool`` and ``error``) plus
    ``n_turns`` and ``episode_cost`` (what the cost terms charged so far); the step where the generator
    answers adds ``prediction``, ``em``, ``f1``, ``cover_em``, ``evidence_recall`` and
    ``generator_reply`` (its raw text). ``env.spec`` shares the generator rather than copying it
    (as `SimulatedSearchEnv` does), so ``gymnasium.make(env.spec)`` uses the same model.
    """

    rewards: PlannerRewards

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
            raise ConfigError("PlannerEnv needs at least one task")
        check_int("top_k", top_k)
        check_int("max_obs_tokens", max_obs_tokens)
        if not isinstance(generator, TextGenerator):
            raise ConfigError(
                f"the generator must have chat(conversations, params) (a searchgym TextGenerator, e.g. a "
                f"policy or searchgym.envs.reader.ExtractiveReader()); got {type(generator).__name__}"
            )
        if isinstance(protocol, str):
            protocol = make_protocol(protocol, (SEARCH, FINISH), goal=GOAL)
        names = {t.name for t in protocol.tools}
        if names != {"search", "finish"}:
            raise ValueError(f"PlannerEnv's protocol needs the tools search and finish, got {sorted(names)}")
        weights = PlannerRewards.parse(rewards)
        super().__init__(tasks, retriever, protocol, weights, top_k=top_k, max_obs_tokens=max_obs_tokens)
        self.generator = generator
        self.generator_params = generator_params
        self._naive: dict[str, float] = {}
        """Per task id, the score of the generator's answer from naive retrieval (`beyond_rag`)."""

    def answer_now(self) -> tuple[float, dict[str, Any]]:
        """End an episode the planner did not finish (at the turn limit): the generator answers
        from the results gathered so far, with no format score. Returns the reward and the info
        entries of that answer (none but the error and counts when the generator fails)."""
        self._require_episode()
        info: dict[str, Any] = {"error": None}
        answered = self._answer(info, finished=False)
        self._done = True
        outcome, fmt, charges = answered if answered is not None else (0.0, 0.0, {})
        return self._reward(outcome, fmt, charges, info), info

    def _new_episode(self) -> None:
        super()._new_episode()
        self._cost = 0.0

    # -- tools -------------------------------------------------------------------------------
    def _call(self, call: ToolCall, info: dict[str, Any]) -> tuple[str, float, float, Charges]:
        if call.name == "search":
            observation, charges = self._search(call, info)
            return observation, 0.0, 0.0, charges
        answered = self._answer(info, finished=True)
        if answered is None:
            failed = f"The answering model failed ({info['error']}). You may finish again or search more."
            return self.protocol.format_result(failed), 0.0, 0.0, {}
        return "", *answered

    def _answer(self, info: dict[str, Any], *, finished: bool) -> tuple[float, float, Charges] | None:
        """The generator answers; returns (outcome, format, the step's other term values: its
        charges, and with ``beyond_rag`` the gain beyond naive retrieval), or None (with
        ``info["error"]`` set) when the generator fails."""
        assert self._task is not None
        try:
            reply = self._generator_reply(self._searches)
            naive = self._naive_rag_score() if self.rewards.beyond_rag else None
        except _GENERATOR_FAILURES + WORLD_FAILURES as e:  # naive retrieval searches too
            self._counts["n_errors"] += 1
            failed = "naive retrieval" if isinstance(e, RetrieverError) else "the generator"
            info["error"] = f"{failed} failed: {type(e).__name__}: {e}"
            return None
        outcome, fmt, charges = self._score_answer(parse_reply(reply), info, format_score=finished)
        info["generator_reply"] = reply
        if naive is not None:
            charges = {**charges, "beyond_rag": outcome - naive}
        return outcome, fmt, charges

    def _generator_reply(self, searches: Sequence[tuple[str, str]]) -> str:
        """The generator's reply to the question and ``searches`` (what it raises, it raises)."""
        assert self._task is not None
        prompt = clean_text(generator_prompt(self._task.question, searches))  # a tokenizer reads it
        completions = self.generator.chat([[{"role": "user", "content": prompt}]], self.generator_params)
        if len(completions) != 1:
            raise ValueError(f"the generator returned {len(completions)} completions for one conversation")
        return clean_text(completions[0].text)  # a server's JSON "\ud800" is a lone surrogate

    def _naive_rag_score(self) -> float:
        """The score (the outcome metric) of the generator's answer from the question's own top
        ``top_k`` results, computed once per task."""
        assert self._task is not None
        task = self._task
        if task.id not in self._naive:
            docs = self.retriever.search(task.question, self.top_k)
            text = truncate_tokens(format_docs(docs), self.max_obs_tokens)
            reply = parse_reply(self._generator_reply([(task.question, text)]))
            self._naive[task.id] = outcome_reward(reply, task.answers, self.rewards.outcome_metric)
        return self._naive[task.id]

    def _turn_charges(self) -> Charges:
        return {} if self.rewards.cost_only_if_correct else {"turns": 1.0}

    def _episode_charges(self) -> Charges:
        return plan_charges(self._counts["n_searches"], self._turn, self._counts["obs_tokens"])

    def _reward(self, outcome: float, fmt: float, charges: Charges, info: dict[str, Any]) -> float:
        self._cost += self.rubric.cost(self._step_values(outcome, fmt, charges))
        return super()._reward(outcome, fmt, charges, info)

    def _info_counts(self) -> dict[str, Any]:
        return {**self._counts, "n_turns": self._turn, "episode_cost": self._cost}


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
