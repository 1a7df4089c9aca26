"""The GRPO update: one optimizer step on the clipped policy-gradient loss over the policy's own
tokens (observation, template and self-search information tokens have mask 0 and get no
gradient), accumulated over micro-batches. The importance ratio compares the current policy with
the log-probs the sampler recorded; the math is in `loss`."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Sequence
from typing import Any

import torch

from searchgym.agents.policies.kv import with_cache
from searchgym.agents.train.config import GRPOConfig
from searchgym.agents.train.loss import LossNorm, Sample, aggregate, collate, policy_loss, token_logprobs
from searchgym.agents.train.shared_prompt import SharedPrompt, by_group
from searchgym.errors import TrainingDiverged


def update(
    wrapped: torch.nn.Module,
    ref_model: torch.nn.Module | None,
    optimizer: torch.optim.Optimizer,
    groups: Sequence[Sequence[Sample]],
    cfg: GRPOConfig,
    accelerator: Any,
    pad_id: int,
) -> dict[str, float]:
    """One optimizer step on the whole batch (``groups`` of loss samples, scored under
    ``cfg.temperature``, the one they were sampled with), accumulated over micro-batches; a
    group's shared prompt is read once (`SharedPrompt`). Raises `TrainingDiverged` (before
    stepping) if the loss or the gradient is not finite."""
    samples = [s for group in groups for s in group]
    totals = torch.tensor(
        [len(samples), sum(sum(s.mask) for s in samples)], dtype=torch.float64, device=accelerator.device
    )
    episodes, tokens = (int(v) for v in accelerator.reduce(totals, reduction="sum"))
    norm = LossNorm(episodes, tokens, cfg.max_turns * cfg.max_new_tokens)
    wrapped.train()
    optimizer.zero_grad(set_to_none=True)
    sums = {"loss": 0.0, "tokens": 0.0, "clipped": 0.0, "kl": 0.0, "ratio": 0.0, "tis": 0.0, "entropy": 0.0}
    share = cfg.share_prompts and ref_model is None and accelerator.num_processes == 1
    parts = by_group(groups) if share else [((), samples)]
    for prompt, part in parts:
        shared = SharedPrompt(wrapped, prompt, accelerator) if prompt else None
        for start in range(0, len(part), cfg.micro_batch_size):
            chunk = part[start : start + cfg.micro_batch_size]
            batch = {k: v.to(accelerator.device) for k, v in collate(chunk, pad_id).items()}
            last = part is parts[-1][1] and start + len(chunk) == len(part)
            sync = contextlib.nullcontext() if last else accelerator.no_sync(wrapped)
            with sync, accelerator.autocast():
                attention, extra = batch["attention_mask"], {}
                if shared is not None:
                    attention = torch.cat([attention.new_ones(len(chunk), len(prompt)), attention], 1)
                    extra = with_cache(wrapped, shared.cache(len(chunk)))
                inputs = (wrapped, batch["input_ids"], attention, batch["mask"], cfg.temperature)
                logp, entropy = token_logprobs(
                    *inputs, with_entropy=True, entropy_grad=bool(cfg.entropy_coef), **extra
                )
                ref_logp = None
                if ref_model is not None:
                    with torch.no_grad():
                        ref_logp, _ = token_logprobs(ref_model, *inputs[1:])
                old_logp, sampler_logp = batch["old_logprobs"], None
                # a guide's tokens (GRPOConfig.guide) were not sampled: the model's own stand in
                old_logp = torch.where(batch["sampled"], old_logp, logp.detach())
                if cfg.tis_cap:  # the one update of the step: the model's log-probs are the old ones
                    old_logp, sampler_logp = logp.detach(), old_logp
                loss, stats = policy_loss(
                    logp,
                    old_logp,
                    batch["advantages"],
                    batch["mask"],
                    norm=norm,
                    aggregation=cfg.loss_aggregation,
                    clip_low=cfg.clip_low,
                    clip_high=cfg.clip_high,
                    ref_logp=ref_logp,
                    kl_coef=cfg.kl_coef,
                    sampler_logp=sampler_logp,
                    tis_cap=cfg.tis_cap,
                )
                if cfg.entropy_coef:
                    bonus = aggregate(entropy, batch["mask"], cfg.loss_aggregation, norm)
                    loss = loss - cfg.entropy_coef * bonus
                # DDP averages gradients over processes; the norm already covers all of them
                accelerator.backward(loss * accelerator.num_processes)
            sums["loss"] += float(loss.detach())
            sums["entropy"] += float((entropy.detach() * batch["mask"]).sum())
            for key, value in stats.items():
                sums[key] += value
        if shared is not None:
            shared.backward()
    grad_norm = float(accelerator.clip_grad_norm_(wrapped.parameters(), cfg.max_grad_norm))
    if not (math.isfinite(sums["loss"]) and math.isfinite(grad_norm)):
        optimizer.zero_grad(set_to_none=True)
        raise TrainingDiverged(
            f"the loss ({sums['loss']}) or gradient norm ({grad_norm}) is not finite; the weights were not "
            f"updated and the last good checkpoint in {cfg.run_dir}/checkpoints is intact. Lower lr or "
            f"max_grad_norm and continue with resume: true"
        )
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    n_tokens = max(sums["tokens"], 1.0)
    return {
        "loss/policy": sums["loss"],
        "loss/kl": sums["kl"] / n_tokens,
        "loss/clip_fraction": sums["clipped"] / n_tokens,
        "loss/ratio": sums["ratio"] / n_tokens,
        "loss/tis_weight": sums["tis"] / n_tokens,
        "loss/entropy": sums["entropy"] / n_tokens,
        "loss/grad_norm": grad_norm,
        "loss/lr": optimizer.param_groups[0]["lr"],
    }
