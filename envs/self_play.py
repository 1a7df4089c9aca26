"""Search Self-play's proposer (SSP, Lu et al. 2025, arXiv 2510.18821) on the generated world.

The proposer is given an answer, searches the world's corpus, and proposes a question whose only
answer it is. SSP checks a proposal by letting a model answer it from the proposer's documents
alone (its RAG filter); here the check is exact (`verify_proposal`): the question is read back
into the world (`searchgym.tasks.world.parse`), its one reading must give the answer, and every
passage of that reading's evidence chain must have been among the passages the proposer's own
searches showed. A verified question is a `Task` with its answers, evidence and chain, so it can
be posed to any solver (`searchgym.agents.play.self_play`, which also scores the proposer by the
solver's pass rate).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from searchgym.envs.backends import make_retriever, world_corpus
from searchgym.envs.factories import world_tasks
from searchgym.envs.protocols import make_protocol
from searchgym.envs.rewards import RewardWeights, format_reward
from searchgym.envs.text_env import Charges, RetrieverEnv
from searchgym.envs.tools import SEARCH, Param, Tool, ToolCall
from searchgym.envs.wrappers import TurnLimit
from searchgym.errors import ConfigError
from searchgym.retrievers.base import Retriever
from searchgym.tasks.metrics import normalize_answer
from searchgym.tasks.task import Task
from searchgym.tasks.world import load_world
from searchgym.tasks.world.parse import readings

PROPOSE = Tool(
    "propose",
    "Give your question. Its only answer must be the given answer, and every fact it uses must be in a "
    "passage your searches found. This ends the episode.",
    (Param("question", "The question."),),
    example="Who founded Treimyne Company?",
)
GOAL = (
    "You are given an answer. Search the encyclopedia for facts that lead to it, then write a question "
    "whose only answer is the given answer."
)
VERDICTS = ("verified", "not a question of the world", "ambiguous", "another answer", "answer in question",
            "evidence not found", "no proposal")  # fmt: skip
"""What `verify_proposal` can say of a proposal, the first one alone meaning it passed."""


@dataclass(frozen=True)
class Verdict:
    """`verify_proposal`'s finding: one of `VERDICTS`, a sentence saying why, and, when verified,
    the proposed question as a task (answers, evidence and chain from the world)."""

    verdict: str
    reason: str
    task: Task | None = None

    @property
    def verified(self) -> bool:
        return self.verdict == VERDICTS[0]


def verify_proposal(
    world: Any, question: str, target: Sequence[str], shown: set[str], task_id: str
) -> Verdict:
    """Whether ``question`` has exactly one reading in ``world``, whose answers include one of the
    ``target`` forms (SQuAD-normalised), none of which the question itself contains, and whose
    every evidence passage is in ``shown`` (the ids of the passages the proposer was shown)."""
    found = readings(world, question)
    if not found:
        return Verdict(
            VERDICTS[1], "no reading: the question is not in the world's phrasing or names no entity"
        )
    if len({r.answers for r in found}) > 1:
        return Verdict(VERDICTS[2], f"{len(found)} readings with different answers")
    reading = found[0]
    wanted = {normalize_answer(a) for a in target}
    if not wanted & {normalize_answer(a) for a in reading.answers}:
        return Verdict(VERDICTS[3], f"its answer is {reading.answers[0]!r}, not {target[0]!r}")
    padded = f" {normalize_answer(question)} "
    if any(f" {a} " in padded for a in wanted):
        return Verdict(VERDICTS[4], "the question contains its answer")
    missing = [i + 1 for i, doc in enumerate(reading.evidence) if doc not in shown]
    if missing:
        hops = ", ".join(map(str, missing))
        return Verdict(VERDICTS[5], f"hop(s) {hops} of its chain were in no passage the searches showed")
    task = Task(
        id=task_id,
        question=" ".join(question.split()),
        answers=reading.answers,
        evidence=reading.evidence,
        metadata={"source": "self-play", "hops": len(reading.path), "chain": list(reading.chain)},
    )
    return Verdict(VERDICTS[0], f"{len(reading.path)}-hop question, every hop's passage found", task)


class ProposeEnv(RetrieverEnv):
    """SSP's proposer over a retriever of ``world``'s corpus. Each task poses an answer (its
    ``answers``: the answer and its other forms); the tools are ``search`` and ``propose``. The
    proposal ends the episode; its outcome is 1 when `verify_proposal` verifies it, else 0 (SSP's
    format penalty of 0). ``info`` at the end holds the proposal as ``prediction`` (``em``, ``f1``
    and ``cover_em`` are the outcome, so an evaluation's EM is the share verified), ``verdict``,
    ``reason`` and, when verified, ``proposed`` (the question as a task's dict)."""

    def __init__(
        self,
        tasks: Sequence[Task],
        retriever: Retriever,
        world: Any,
        *,
        protocol: str = "tags",
        top_k: int = 3,
        max_obs_tokens: int = 512,
        rewards: RewardWeights | None = None,
    ) -> None:
        self.world = world
        actions = make_protocol(protocol, (SEARCH, PROPOSE), goal=GOAL)
        super().__init__(
            tasks, retriever, actions, rewards or RewardWeights(), top_k=top_k, max_obs_tokens=max_obs_tokens
        )

    def _call(self, call: ToolCall, info: dict[str, Any]) -> tuple[str, float, float, Charges]:
        if call.name == "search":
            observation, charges = self._search(call, info)
            return observation, 0.0, 0.0, charges
        assert self._task is not None
        question = call.arguments["question"]
        verdict = verify_proposal(
            self.world, question, self._task.answers, self._retrieved, f"{self._task.id}/proposed"
        )
        outcome = float(verdict.verified)
        info.update(  # an evaluation's EM of a proposer is its share of verified proposals
            prediction=question,
            em=outcome,
            f1=outcome,
            cover_em=outcome,
            evidence_recall=None,
            verdict=verdict.verdict,
            reason=verdict.reason,
            proposed=verdict.task.to_dict() if verdict.task else None,
        )
        self._done = True
        return "", outcome, format_reward(self._counts["n_invalid"], self._counts["n_extra_calls"]), {}


def proposal_tasks(questions: Sequence[Task]) -> list[Task]:
    """One proposal a distinct answer of ``questions``: SSP's seed answers. A task's ``question``
    states the answer, its ``answers`` are the answer's forms, and its metadata keeps the
    question it came from (which a scripted proposer may read, as the oracle reads the gold
    chain)."""
    out, seen = [], set()
    for source in questions:
        key = normalize_answer(source.answers[0])
        if key in seen:
            continue
        seen.add(key)
        out.append(Task(
            id=f"propose/{source.id}",
            question=f"The answer: {source.answers[0]}",
            answers=source.answers,
            metadata={"source": "self-play proposal", "seed_question": source.question,
                      "chain": source.metadata.get("chain", [])},
        ))  # fmt: skip
    return out


def fictional_propose(
    *,
    backend: str = "bm25",
    seed: int = 0,
    n_passages: int = 2000,
    split: str = "train",
    hops: int | list[int] | None = None,
    max_turns: int = 6,
    rewards: RewardWeights | dict[str, Any] | None = None,
    task_set: str | None = None,
    **options: Any,
) -> gym.Env:
    """The proposer of Search Self-play over the generated world's corpus, searched with
    ``backend``; its answers are those of the ``split`` questions of ``hops`` (default the train
    split: the questions it proposes are new training tasks), or of ``task_set``'s
    (`envs.factories.env_tasks`). ``options`` are `ProposeEnv`'s."""
    unknown = sorted(set(options) - {"protocol", "top_k", "max_obs_tokens"})
    if unknown:
        raise ConfigError(
            f"unknown env option(s) {unknown} for the proposer; it takes protocol, top_k and max_obs_tokens"
        )
    world = load_world(seed=seed, n_passages=n_passages)
    questions = world_tasks(task_set, split, hops, seed, n_passages)
    retriever = make_retriever(backend, world_corpus(seed, n_passages))
    env = ProposeEnv(
        proposal_tasks(questions), retriever, world, rewards=RewardWeights.parse(rewards), **options
    )
    return TurnLimit(env, max_turns)
