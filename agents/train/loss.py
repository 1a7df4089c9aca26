"""The GRPO loss as pure functions: token bookkeeping (`Sample`, `collate`, `token_logprobs`), the
clipped policy-gradient loss with its aggregations, and the k3 KL."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from searchgym.agents.train.config import Aggregation
from searchgym.agents.train.scoring import target_logits


def kl_k3(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimate of KL(policy || reference): ``exp(ref - logp) - (ref - logp) - 1``,
    never negative, zero where the two agree.

    >>> kl_k3(torch.tensor([-1.0, -2.0]), torch.tensor([-1.0, -1.0]))
    tensor([0.0000, 0.7183])
    """
    delta = ref_logp - logp
    return torch.exp(delta) - delta - 1


@dataclass(frozen=True)
class LossNorm:
    """Totals over a whole step's batch that the loss divides by, so that the losses of its
    micro-batches add up to the loss of the batch."""

    episodes: int
    tokens: int
    """Policy tokens (mask 1) in the batch."""
    max_tokens: int
    """Dr.GRPO's constant: the most policy tokens one episode can have."""


def aggregate(values: torch.Tensor, mask: torch.Tensor, how: Aggregation, norm: LossNorm) -> torch.Tensor:
    """Reduce per-token ``values`` [B, L] over the tokens where ``mask`` is 1.

    >>> v, m = torch.tensor([[1.0, 3.0], [2.0, 0.0]]), torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    >>> [aggregate(v, m, how, LossNorm(2, 3, 4)).item() for how in ("token_mean", "grpo", "dr_grpo")]
    [2.0, 2.0, 0.75]
    """
    masked = values * mask
    if how == "token_mean":
        return masked.sum() / max(norm.tokens, 1)
    if how == "grpo":
        return (masked.sum(dim=1) / mask.sum(dim=1).clamp(min=1)).sum() / max(norm.episodes, 1)
    return masked.sum() / max(norm.episodes * norm.max_tokens, 1)


def policy_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    norm: LossNorm,
    aggregation: Aggregation = "token_mean",
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    ref_logp: torch.Tensor | None = None,
    kl_coef: float = 0.0,
    sampler_logp: torch.Tensor | None = None,
    tis_cap: float = 0.0,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The clipped policy-gradient loss (plus ``kl_coef`` x k3 KL to the reference) over the
    policy tokens (``mask`` 1) of a micro-batch; all tensors are [B, L] and aligned. Returns the
    loss and sums for logging: ``tokens``, ``clipped`` (tokens whose ratio was clipped), ``kl``,
    ``ratio`` and ``tis`` (the importance weights).

    With ``tis_cap``, each token's term is weighted by ``min(exp(old_logp - sampler_logp),
    tis_cap)``: truncated importance sampling from the sampler's distribution to the old policy's.

    >>> t = torch.zeros(1, 2)
    >>> loss, stats = policy_loss(t, t, torch.tensor([[1.0, -1.0]]), torch.ones(1, 2), norm=LossNorm(1, 2, 2))
    >>> loss.item(), stats["clipped"]
    (0.0, 0.0)
    """
    ratio = torch.exp(logp - old_logp)
    clipped_ratio = ratio.clamp(1 - clip_low, 1 + clip_high)
    per_token = -torch.minimum(ratio * advantages, clipped_ratio * advantages)
    tis = torch.ones_like(logp)
    if tis_cap:
        tis = torch.exp(old_logp - sampler_logp).clamp(max=tis_cap).detach()
        per_token = per_token * tis
    kl = kl_k3(logp, ref_logp) if ref_logp is not None else torch.zeros_like(logp)
    if ref_logp is not None and kl_coef:
        per_token = per_token + kl_coef * kl
    loss = aggregate(per_token, mask, aggregation, norm)
    with torch.no_grad():
        clipped = ((ratio < 1 - clip_low) & (advantages < 0)) | ((ratio > 1 + clip_high) & (advantages > 0))
        stats = {
            "tokens": float(mask.sum()),
            "clipped": float((clipped * mask).sum()),
            "kl": float((kl * mask).sum()),
            "ratio": float((ratio * mask).sum()),
            "tis": float((tis * mask).sum()),
        }
    return loss, stats


@dataclass
class Sample:
    """One episode for the loss: ``ids`` (prompt, then the episode's tokens from ``start``) and,
    per token from ``start`` on, its mask, sampling log-prob and advantage; ``sampled`` False for
    a guide's episode, whose old log-probs are the trained model's own (`Trajectory.sampled`)."""

    ids: list[int]
    start: int
    mask: list[int]
    old_logprobs: list[float]
    advantages: list[float]
    sampled: bool = True


def collate(samples: Sequence[Sample], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-padded tensors. ``input_ids``/``attention_mask`` are [B, L]; ``mask``,
    ``old_logprobs`` and ``advantages`` are [B, L - 1], aligned with the targets ``input_ids[:, 1:]``
    (position j scores token j + 1); ``sampled`` [B, 1] (bool) is each sample's.

    >>> b = collate([Sample([5, 6, 7], 1, [1, 0], [-0.5, 0.0], [2.0, 2.0])], pad_id=0)
    >>> b["mask"].tolist(), b["advantages"].tolist()
    ([[1.0, 0.0]], [[2.0, 2.0]])
    """
    length = max(len(s.ids) for s in samples)
    batch = {
        "input_ids": torch.full((len(samples), length), pad_id, dtype=torch.long),
        "attention_mask": torch.zeros(len(samples), length, dtype=torch.long),
        **{name: torch.zeros(len(samples), length - 1) for name in ("mask", "old_logprobs", "advantages")},
        "sampled": torch.tensor([[s.sampled] for s in samples]),
    }
    for i, s in enumerate(samples):
        if not len(s.mask) == len(s.old_logprobs) == len(s.advantages) == len(s.ids) - s.start:
            raise ValueError(f"sample {i}: mask, log-probs and advantages must cover ids[start:]")
        if s.start < 1:
            raise ValueError(f"sample {i}: the prompt must have at least one token")
        batch["input_ids"][i, : len(s.ids)] = torch.tensor(s.ids)
        batch["attention_mask"][i, : len(s.ids)] = 1
        targets = slice(s.start - 1, len(s.ids) - 1)
        batch["mask"][i, targets] = torch.tensor(s.mask, dtype=torch.float)
        batch["old_logprobs"][i, targets] = torch.tensor(s.old_logprobs)
        batch["advantages"][i, targets] = torch.tensor(s.advantages)
    return batch


def token_logprobs(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    mask: torch.Tensor,
    temperature: float = 1.0,
    *,
    with_entropy: bool = False,
    entropy_grad: bool = True,
    **model_kwargs,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probs [B, L - 1] of each next token under ``softmax(logits / temperature)`` where
    ``mask`` [B, L - 1] is 1 (0 elsewhere), and with ``with_entropy`` the entropy of each of
    those distributions [B, L - 1] (0 elsewhere; with a gradient when the logits have one and
    ``entropy_grad`` is set, for `GRPOConfig.entropy_coef`, else computed without a graph).
    Logits are computed only where ``mask`` is 1 when the model takes ``logits_to_keep``
    (transformers models do): a vocabulary-sized row per policy token,
    none for the prompt and observations. Those logits are the only vocabulary-sized tensor kept
    for the backward pass: the float32 log-softmax runs over chunks of ``LOGIT_CHUNK`` rows and is
    recomputed in the backward pass (`_chunk_logprobs`). ``model_kwargs`` (a cache, with
    ``attention_mask`` covering it too) go to the model."""
    picked = mask.bool()
    targets = torch.zeros_like(input_ids, dtype=torch.bool)
    targets[:, 1:] = picked
    logits = target_logits(model, input_ids, attention_mask, targets, float32=False, **model_kwargs)
    chosen = input_ids[targets]
    parts, entropies = [], []
    for start in range(0, len(chosen), LOGIT_CHUNK):
        rows = slice(start, start + LOGIT_CHUNK)
        args = (logits[rows], chosen[rows], temperature)
        parts.append(_recomputed(_chunk_logprobs, *args))
        if with_entropy and entropy_grad:
            entropies.append(_recomputed(_chunk_entropy, *args))
        elif with_entropy:
            with torch.no_grad():
                entropies.append(_chunk_entropy(*args))
    logp = _scatter(parts, picked, logits)
    return logp, _scatter(entropies, picked, logits) if with_entropy else None


def _recomputed(fn, logits: torch.Tensor, *args) -> torch.Tensor:
    """``fn(logits, *args)``, recomputed in the backward pass where the logits have a gradient
    (its float32 vocabulary-sized intermediates are not kept)."""
    if logits.requires_grad:
        return torch.utils.checkpoint.checkpoint(fn, logits, *args, use_reentrant=False)
    return fn(logits, *args)


def _scatter(parts: list[torch.Tensor], picked: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
    """The chunks' values, one per picked position, laid out as ``picked`` [B, L - 1]."""
    flat = torch.cat(parts) if parts else logits.new_zeros(0, dtype=torch.float32)
    return torch.zeros(picked.shape, dtype=flat.dtype, device=flat.device).masked_scatter(picked, flat)


LOGIT_CHUNK = 1024
"""Policy tokens whose float32 log-softmax `token_logprobs` computes at once."""


def _chunk_logprobs(logits: torch.Tensor, chosen: torch.Tensor, temperature: float) -> torch.Tensor:
    """``log softmax(logits / temperature)`` of the ``chosen`` tokens, in float32: the chosen
    logit minus a logsumexp, never a full log-softmax."""
    scaled = logits.float() / temperature
    return scaled.gather(1, chosen[:, None])[:, 0] - scaled.logsumexp(-1)


def _chunk_entropy(logits: torch.Tensor, chosen: torch.Tensor, temperature: float) -> torch.Tensor:
    """The entropy of each row's ``softmax(logits / temperature)``, in float32 (``chosen`` is
    unused: the signature is `_chunk_logprobs`'s)."""
    scaled = logits.float() / temperature
    return scaled.logsumexp(-1) - (scaled.softmax(-1) * scaled).sum(-1)
