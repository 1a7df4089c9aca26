"""A GRPO step's rewards and advantages: the env's rubric scored each episode as it was played;
the trainer adds its own terms (`TrainerTermFn`: information gain, IGPO, or a user's) and turns
the rewards into per-token advantages within each group (`score_groups`). The groups stay
groups: one list of loss samples per task, as the update reads them (an agent program's episode
may give several, or none)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from searchgym.agents.play.episode import Episode, episode_metrics
from searchgym.agents.policies.agent import Trajectory
from searchgym.agents.train.advantages import (
    degenerate_groups,
    group_advantages,
    igpo_advantages,
    stratified_advantages,
)
from searchgym.agents.train.config import GRPOConfig
from searchgym.agents.train.info_gain import answer_tokens, batch_turn_answer_probabilities, information_gain
from searchgym.agents.train.loss import Sample
from searchgym.agents.train.play import Group
from searchgym.envs.protocols import ActionProtocol
from searchgym.envs.rubric import Rubric


@dataclass(frozen=True)
class Scorer:
    """What a trainer term reads: the policy being trained (``model``, ``tokenizer``), the env's
    action ``protocol``, and ``cached_kv``: the rollout engine's keys and values of the episodes
    it just played, where it kept them (else None)."""

    model: Any
    tokenizer: Any
    protocol: ActionProtocol
    cached_kv: Any = None


TrainerTermFn = Callable[[Sequence[Episode], Scorer], list[list[float]]]
"""A trainer reward term: per episode, a value for each of its turns from the first (fewer than
its turns where the last ones score nothing). An episode's value is their sum; ``advantage:
igpo`` rewards each turn with the weighted values, and the last one with the env's reward too."""


def score_groups(
    groups: list[Group], rubric: Rubric, cfg: GRPOConfig, scorer: Scorer
) -> tuple[list[list[Sample]], dict[str, float]]:
    """The loss samples of a step's groups (one list per group) and the step's reward and rollout
    metrics. An episode's reward is what the env's rubric gave it, plus its weighted ``trainer``
    terms of ``rubric``, each scored by its function with ``scorer``; their values join each
    turn's and episode's ``reward_components`` (shown by searchgym view)."""
    flat = [ep for group in groups for ep in group]
    trainer = [(term.weight, term.name, term.fn(flat, scorer)) for term in rubric.at("trainer")]
    for _, name, values in trainer:
        for ep, episode_values in zip(flat, values):
            for turn, value in zip(ep.turns, episode_values):
                turn.reward_components[name] = value
            ep.reward_components[name] = sum(episode_values)
    rewards = trained_rewards(groups, trainer, cfg.advantage)
    if cfg.advantage == "igpo":
        turn_rewards, i = [], 0
        for group in groups:
            turn_rewards.append(
                [[*weighted_turns(trainer, i + j), ep.total_reward] for j, ep in enumerate(group)]
            )
            i += len(group)
        per_turn = [a for group in igpo_advantages(turn_rewards, gamma=cfg.igpo_gamma) for a in group]
    else:
        if cfg.advantage == "stratified":
            strata = torch.tensor([[ep.n_searches for ep in group] for group in groups])
            adv = stratified_advantages(rewards, strata, alpha=cfg.stratified_alpha)
        else:
            adv = group_advantages(rewards, scale=cfg.advantage == "grpo")
        per_turn = [[float(a)] * max(ep.n_turns, 1) for a, ep in zip(adv.flatten(), flat)]
    samples = [episode_samples(ep, turn_adv) for ep, turn_adv in zip(flat, per_turn)]
    # the rubric's terms, then any component an env without a rubric reports
    reported = sorted({name for ep in flat for name in ep.reward_components})
    names = dict.fromkeys([*(t.name for t in rubric.terms), *reported])
    metrics = {
        "reward/total": float(rewards.mean()),
        **{f"reward/{name}": mean([ep.reward_components.get(name, 0.0) for ep in flat]) for name in names},
        **{f"rollout/{name}": value for name, value in episode_metrics(flat).items()},
        "rollout/response_tokens": mean([sum(sum(s.mask) for s in ep) for ep in samples]),
        "rollout/degenerate_trained": float(degenerate_groups(rewards).double().mean()),
    }
    in_order = iter(samples)
    return [[s for _ in group for s in next(in_order)] for group in groups], metrics


TrainerValues = Sequence[tuple[float, str, list[list[float]]]]
"""Each trainer term's weight, name and values: per episode (the step's, group by group), per turn."""


def trained_rewards(
    groups: Sequence[Sequence[Episode]], trainer: TrainerValues, advantage: str
) -> torch.Tensor:
    """The rewards [groups, G] (float64) the advantages rank: each episode's env reward plus its
    weighted ``trainer`` terms, each summed over the episode's turns; the env's alone under
    ``igpo``, whose advantages give the trainer's terms turn by turn instead."""
    rewards = torch.tensor([[ep.total_reward for ep in group] for group in groups], dtype=torch.float64)
    for weight, _, values in trainer if advantage != "igpo" else ():
        rewards = rewards + weight * torch.tensor([sum(v) for v in values]).view_as(rewards)
    return rewards


def weighted_turns(trainer: TrainerValues, i: int) -> list[float]:
    """Episode ``i``'s weighted trainer-term values, turn by turn, summed over the terms."""
    per_term = [[weight * v for v in values[i]] for weight, _, values in trainer]
    return [sum(turn) for turn in itertools.zip_longest(*per_term, fillvalue=0.0)]


def mean(values: Sequence[float]) -> float:
    return float(sum(values) / len(values)) if values else 0.0


def info_gain(episodes: Sequence[Episode], scorer: Scorer) -> list[list[float]]:
    """Per turn, how much the turn raised the policy's probability of the gold answer (IGPO).

    Per episode, the information gain of each turn but the last: the rise of the policy's
    teacher-forced probability of the gold answer once that turn's result is shown. With the
    scorer's ``cached_kv`` (the CPU engine's, which still holds the episodes it just played,
    computed with these weights) an episode's tokens are not read again; only each turn's probe is."""
    answers = [answer_tokens(scorer.tokenizer, scorer.protocol, ep.answers[0]) for ep in episodes]
    trajectories = [ep.trajectory for ep in episodes]
    probabilities = batch_turn_answer_probabilities(scorer.model, trajectories, answers, scorer.cached_kv)
    return [information_gain(p) for p in probabilities]


def episode_samples(episode: Episode, turn_advantages: Sequence[float]) -> list[Sample]:
    """The loss samples of one episode: its trajectory's, or one per token stream of an agent
    program (each call's tokens get the episode's advantage; a program that made no call
    gives none)."""
    if episode.streams is None:
        return [to_sample(episode.trajectory, turn_advantages)]
    return [to_sample(s, turn_advantages[:1] * len(s.turn_ends)) for s in episode.streams]


def to_sample(trajectory: Trajectory, turn_advantages: Sequence[float]) -> Sample:
    """The loss sample of one episode: every token of turn t gets that turn's advantage."""
    advantages = [0.0] * len(trajectory.ids)
    starts = list(trajectory.turn_starts) + [len(trajectory.ids)]
    for t, value in enumerate(turn_advantages[: len(trajectory.turn_ends)]):
        for i in range(starts[t], starts[t + 1]):
            advantages[i] = value
    return Sample(
        trajectory.prompt_ids + trajectory.ids,
        len(trajectory.prompt_ids),
        list(trajectory.mask),
        list(trajectory.logprobs),
        advantages,
        trajectory.sampled,
    )
