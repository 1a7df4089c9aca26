"""Search Self-play as a task source (SSP, Lu et al. 2025, arXiv 2510.18821).

A proposer plays `searchgym.envs.self_play.ProposeEnv` (given an answer, it searches and proposes a
question); each proposal is verified exactly against the world (`verify_proposal`); a solver then
plays every verified question ``solver_episodes`` times on a search env over the same corpus, and
its pass rate ``s`` sets the proposer's reward: SSP's default ``1 - s`` (a question the solver
always answers teaches nothing), or its ``intermediate`` option ``4 s (1 - s)``, highest at
``s = 1/2``; an unverified proposal gets 0. The verified questions, with their answers, evidence
and chain from the world, are a questions JSONL (`write_questions`) that any env poses with
``task_set``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from searchgym.agents.base import Agent
from searchgym.agents.play.episode import Episode
from searchgym.agents.play.rollout import run_episodes, sample_tasks
from searchgym.envs.registry import make
from searchgym.envs.self_play import Verdict, verify_proposal
from searchgym.errors import ConfigError
from searchgym.tasks.task import Task

PROPOSE_ENV = "searchgym/FictionalQA-Propose-v0"
SOLVE_ENV = "searchgym/FictionalQA-BM25-v0"
Rule = Literal["inverse", "intermediate"]
WORLD_OPTIONS = ("seed", "n_passages", "backend")
"""The proposer env's options that the solver's env shares, so that both search one corpus."""


@dataclass
class Proposal:
    """One proposer episode, judged: its verdict and, when verified, the solver's pass rate on
    the question and the proposer's reward."""

    episode: Episode
    verdict: Verdict
    pass_rate: float | None = None
    reward: float = 0.0

    def row(self) -> dict[str, Any]:
        return {
            "task_id": self.episode.task_id,
            "answer": self.episode.answers[0],
            "proposal": self.episode.prediction,
            "verdict": self.verdict.verdict,
            "reason": self.verdict.reason,
            "pass_rate": self.pass_rate,
            "proposer_reward": self.reward,
        }


def proposer_reward(pass_rate: float | None, rule: Rule = "inverse") -> float:
    """SSP's proposer reward for a solver pass rate (None: the proposal was not verified).

    >>> proposer_reward(0.25), proposer_reward(0.25, "intermediate"), proposer_reward(None)
    (0.75, 0.75, 0.0)
    """
    if pass_rate is None:
        return 0.0
    return 1.0 - pass_rate if rule == "inverse" else 4.0 * pass_rate * (1.0 - pass_rate)


def self_play(
    proposer: Callable[[], Agent],
    solver: Callable[[], Agent],
    *,
    n: int,
    solver_episodes: int = 4,
    env_kwargs: dict[str, Any] | None = None,
    solver_kwargs: dict[str, Any] | None = None,
    rule: Rule = "inverse",
    seed: int = 0,
    n_envs: int = 4,
    on_episode: Callable[[Episode], None] | None = None,
) -> tuple[list[Proposal], list[Episode]]:
    """``n`` proposals by ``proposer`` (agents made by the callable) on `PROPOSE_ENV` made with
    ``env_kwargs``, each verified, and ``solver_episodes`` episodes of ``solver`` on each verified
    question (on `SOLVE_ENV` with ``solver_kwargs``, over the same world); returns the proposals
    in task order and the solver's episodes."""
    if solver_episodes < 1:
        raise ConfigError(f"solver_episodes must be at least 1, got {solver_episodes}")
    env_kwargs = dict(env_kwargs or {})
    shared = {k: env_kwargs[k] for k in WORLD_OPTIONS if k in env_kwargs}
    solver_kwargs = {**shared, **(solver_kwargs or {})}
    probe = make(PROPOSE_ENV, **env_kwargs)
    world, tasks = probe.unwrapped.world, sample_tasks(probe.unwrapped.tasks, n, seed)
    probe.close()
    episodes = run_episodes(
        lambda: make(PROPOSE_ENV, **env_kwargs),
        proposer,
        tasks,
        n_envs=n_envs,
        seed=seed,
        on_episode=on_episode,
    )
    proposals = [Proposal(ep, judge(world, ep)) for ep in episodes]
    verified = [p for p in proposals if p.verdict.verified]
    questions = [p.verdict.task for p in verified for _ in range(solver_episodes)]
    solve = lambda: make(SOLVE_ENV, **solver_kwargs)  # noqa: E731
    solved = (
        run_episodes(solve, solver, questions, n_envs=n_envs, seed=seed, on_episode=on_episode)
        if questions
        else []
    )
    for i, proposal in enumerate(verified):
        runs = solved[i * solver_episodes : (i + 1) * solver_episodes]
        proposal.pass_rate = sum(ep.em for ep in runs) / solver_episodes
        proposal.reward = proposer_reward(proposal.pass_rate, rule)
    return proposals, solved


def judge(world: Any, episode: Episode) -> Verdict:
    """`verify_proposal` of a proposer's episode, from what it saved: its proposal and the ids
    of the passages its searches showed (so a saved episode is judged again the same way)."""
    shown = {doc for turn in episode.turns for doc in turn.doc_ids or ()}
    if episode.prediction is None:
        return Verdict("no proposal", "the episode ended without a proposal (turn limit)")
    return verify_proposal(world, episode.prediction, episode.answers, shown, f"{episode.task_id}/proposed")


def write_questions(proposals: Sequence[Proposal], path: str | os.PathLike[str]) -> Path:
    """The verified questions as a questions JSONL (`searchgym.tasks.questions`), each with its
    chain, the answer it was proposed for, the solver's pass rate and the proposer's reward in
    ``metadata``; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for p in proposals:
            if p.verdict.verified:
                task: Task = p.verdict.task  # type: ignore[assignment]  (verified)
                meta = task.metadata | {"pass_rate": p.pass_rate, "proposer_reward": p.reward}
                f.write(json.dumps(task.to_dict() | {"metadata": meta}, ensure_ascii=False) + "\n")
    return path
