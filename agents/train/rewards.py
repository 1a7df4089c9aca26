"""A GRPO step's rewards and advantages: the env's rubric scored each episode as it was played;
the trainer adds its own terms (information gain, IGPO) and turns the rewards into per-token
advantages within each group (`score_groups`). The groups stay groups: one list of loss samples
per task, as the update reads them (an agent program's episode may give several, or none)."""

from __future__ import annotations

from collections.abc import Sequence
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


def score_groups(
    groups: list[Group],
    rubric: Rubric,
    cfg: GRPOConfig,
    model: Any,
    tokenizer: Any,
    protocol: ActionProtocol,
    cached_kv: Any = None,
) -> tuple[list[list[Sample]], dict[str, float]]:
    """The loss samples of a step's groups (one list per group) and the step's reward and rollout
    metrics. An episode's reward is what the env's rubric gave it, plus the weighted ``trainer``
    terms of ``rubric`` (``info_gain``: per turn, see `information_gains`; ``cached_kv``: the
    rollout engine's keys and values, where it kept them)."""
    flat = [ep for group in groups for ep in group]
    rewards = torch.tensor([[ep.total_reward for ep in group] for group in groups], dtype=torch.float64)
    weight = rubric.weight("info_gain")
    gains = information_gains(flat, model, tokenizer, protocol, cached_kv) if weight else None
    for ep, episode_gains in zip(flat, gains or []):
        for turn, gain in zip(ep.turns, episode_gains):
            turn.info_gain = gain  # shown per turn by searchgym view
    if gains is not None and cfg.advantage != "igpo":
        rewards = rewards + weight * torch.tensor([sum(g) for g in gains]).view_as(rewards)
    if cfg.advantage == "igpo":
        turn_rewards, i = [], 0
        for group in groups:
            turn_rewards.append(
                [[weight * g for g in gains[i + j]] + [ep.total_reward] for j, ep in enumerate(group)]
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
    # the env's terms, then any component an env without a rubric reports
    reported = sorted({name for ep in flat for name in ep.reward_components})
    names = dict.fromkeys([*(t.name for t in rubric.terms if t.when != "trainer"), *reported])
    metrics = {
        "reward/total": float(rewards.mean()),
        **{f"reward/{name}": mean([ep.reward_components.get(name, 0.0) for ep in flat]) for name in names},
        **{f"rollout/{name}": value for name, value in episode_metrics(flat).items()},
        "rollout/response_tokens": mean([sum(sum(s.mask) for s in ep) for ep in samples]),
        "rollout/degenerate_trained": float(degenerate_groups(rewards).double().mean()),
    }
    if gains is not None:
        metrics["reward/info_gain"] = mean([sum(g) for g in gains])
    in_order = iter(samples)
    return [[s for _ in group for s in next(in_order)] for group in groups], metrics


def mean(values: Sequence[float]) -> float:
    return float(sum(values) / len(values)) if values else 0.0


def information_gains(
    episodes: Sequence[Episode], model: Any, tokenizer: Any, protocol: ActionProtocol, cached_kv: Any = None
) -> list[list[float]]:
    """Per episode, the information gain of each turn but the last (IGPO): the rise of the
    policy's teacher-forced probability of the gold answer once that turn's result is shown.
    With ``cached_kv`` (the CPU engine's, which still holds the episodes it just played, computed
    with these weights) an episode's tokens are not read again; only each turn's probe is."""
    answers = [answer_tokens(tokenizer, protocol, ep.answers[0]) for ep in episodes]
    trajectories = [ep.trajectory for ep in episodes]
    probabilities = batch_turn_answer_probabilities(model, trajectories, answers, cached_kv)
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
    )
