"""Advantage estimators, as pure functions over reward tensors: GRPO and Dr.GRPO
(`group_advantages`), Stratified GRPO, and IGPO's turn-level advantages."""

from __future__ import annotations

from collections.abc import Sequence

import torch


def group_advantages(rewards: torch.Tensor, *, scale: bool = True, eps: float = 1e-6) -> torch.Tensor:
    """Advantages of ``rewards`` [groups, G]: minus the group mean, and (GRPO; not Dr.GRPO)
    divided by the group's standard deviation. A group whose rewards are all equal gets zeros.

    >>> group_advantages(torch.tensor([[1.0, 0.0], [2.0, 2.0]]), scale=False)
    tensor([[ 0.5000, -0.5000],
            [ 0.0000,  0.0000]])
    """
    centred = rewards - rewards.mean(dim=1, keepdim=True)
    return centred / (rewards.std(dim=1, keepdim=True) + eps) if scale else centred


def degenerate_groups(rewards: torch.Tensor, tol: float = 1e-8) -> torch.Tensor:
    """Which groups of ``rewards`` [groups, G] have all rewards equal (no learning signal).

    >>> degenerate_groups(torch.tensor([[1.0, 1.0], [0.0, 1.0]]))
    tensor([ True, False])
    """
    return (rewards.max(dim=1).values - rewards.min(dim=1).values) <= tol


def stratified_advantages(
    rewards: torch.Tensor, strata: torch.Tensor, *, alpha: float = 0.5, eps: float = 1e-6
) -> torch.Tensor:
    """Stratified GRPO: within each group, z-score each episode against the episodes of its own
    stratum (equal ``strata`` value, e.g. the number of searches; a stratum of one gets 0), then
    blend ``alpha * stratified + (1 - alpha) * group_advantages``.

    >>> r, s = torch.tensor([[1.0, 0.0, 1.0, 1.0]]), torch.tensor([[0, 0, 1, 1]])
    >>> stratified_advantages(r, s, alpha=1.0)
    tensor([[ 0.7071, -0.7071,  0.0000,  0.0000]])
    """
    within = torch.zeros_like(rewards)
    for g in range(rewards.shape[0]):
        for value in strata[g].unique():
            members = strata[g] == value
            if int(members.sum()) > 1:
                r = rewards[g, members]
                within[g, members] = (r - r.mean()) / (r.std() + eps)
    return alpha * within + (1 - alpha) * group_advantages(rewards, eps=eps)


def igpo_advantages(
    turn_rewards: Sequence[Sequence[Sequence[float]]], *, gamma: float = 1.0, eps: float = 1e-6
) -> list[list[list[float]]]:
    """IGPO's turn-level advantages. ``turn_rewards[g][i][t]`` is episode i of group g's reward at
    turn t (information gain for t < T, the outcome at the last turn). All turn rewards of a group
    are z-scored together, then each turn's advantage is the discounted sum of its own and later
    turns' scores.

    >>> [[round(a, 4) for a in episode] for episode in igpo_advantages([[[0.0, 1.0], [0.0]]])[0]]
    [[0.5773, 1.1547], [-0.5773]]
    """
    out: list[list[list[float]]] = []
    for group in turn_rewards:
        pooled = torch.tensor([r for episode in group for r in episode], dtype=torch.float64)
        mean = pooled.mean()
        std = pooled.std() if len(pooled) > 1 else torch.tensor(0.0, dtype=torch.float64)
        advantages = []
        for episode in group:
            z = [(r - mean.item()) / (std.item() + eps) for r in episode]
            running, acc = 0.0, []
            for score in reversed(z):
                running = score + gamma * running
                acc.append(running)
            advantages.append(acc[::-1])
        out.append(advantages)
    return out
