"""Scoring token sequences with a causal LM: the one place that turns padded rows and a mask of
wanted tokens into their log-probs. GRPO's loss, IGPO's answer probabilities and the SFT warm
start all go through `target_logits`, so logits are computed only where a token is scored."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import torch

from searchgym.agents.policies.kv import forward_takes


def right_pad(
    sequences: Sequence[Sequence[int]], masks: Sequence[Sequence[int]], *, device: torch.device | str = "cpu"
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(input_ids, attention_mask, target_mask)`` of right-padded rows (pad id 0, masked out).
    ``masks[i][k]`` marks the tokens of row i whose log-prob is wanted."""
    width = max(map(len, sequences))
    ids = torch.zeros(len(sequences), width, dtype=torch.long)
    attention = torch.zeros(len(sequences), width, dtype=torch.long)
    target = torch.zeros(len(sequences), width, dtype=torch.bool)
    for i, (seq, mask) in enumerate(zip(sequences, masks)):
        ids[i, : len(seq)] = torch.tensor(seq, dtype=torch.long)
        attention[i, : len(seq)] = 1
        target[i, : len(mask)] = torch.tensor(mask, dtype=torch.bool)
    return ids.to(device), attention.to(device), target.to(device)


def target_logits(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    target_mask: torch.Tensor,
    *,
    float32: bool = True,
    **model_kwargs: Any,
) -> torch.Tensor:
    """The logits [N, V] that predict ``input_ids[target_mask]`` (N tokens, row-major), each from
    the tokens before it, in float32 (or, with ``float32`` False, the model's output dtype). Where
    the model takes a boolean ``logits_to_keep`` (transformers models do), only those N rows of
    vocabulary logits are ever computed, so prompts and observations cost no vocabulary-sized
    activations. ``model_kwargs`` (a cache, ``position_ids``) go to the model."""
    if target_mask[:, 0].any():
        raise ValueError("the first token of a row has nothing before it to be predicted from")
    predicting = torch.zeros_like(target_mask, dtype=torch.bool)
    predicting[:, :-1] = target_mask[:, 1:]
    if takes_logits_to_keep(model):
        inputs = {"input_ids": input_ids, "attention_mask": attention_mask, **model_kwargs}
        if masks_logits():
            logits = model(**inputs, logits_to_keep=predicting).logits
        else:  # older transformers keep the same positions in every row: the rows' union, then each row's
            columns = predicting.any(0).nonzero().squeeze(1)
            logits = model(**inputs, logits_to_keep=columns).logits[predicting[:, columns]]
    else:
        logits = model(input_ids=input_ids, attention_mask=attention_mask, **model_kwargs).logits[predicting]
    logits = logits.reshape(-1, logits.shape[-1])
    return logits.float() if float32 else logits


def target_logprobs(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    target_mask: torch.Tensor,
    **model_kwargs: Any,
) -> torch.Tensor:
    """``log π(input_ids[b, k] | input_ids[b, :k])`` for every ``(b, k)`` where ``target_mask`` is
    set (k ≥ 1), flattened in row-major order, in float32 (`target_logits`' ``model_kwargs``): what
    IGPO's probes and the SFT loss score. The GRPO loss's `searchgym.agents.train.loss.token_logprobs`
    gives them aligned [B, L - 1] instead, under a temperature, with the entropy."""
    logits = target_logits(model, input_ids, attention_mask, target_mask, **model_kwargs)
    return -torch.nn.functional.cross_entropy(logits, input_ids[target_mask.bool()], reduction="none")


@functools.cache
def masks_logits() -> bool:
    """Whether transformers' models take a [batch, length] boolean ``logits_to_keep`` (its
    ``slice_logits_to_keep``, in 5.2x; 5.17 indexed ``hidden_states[:, logits_to_keep]``, which
    such a mask breaks). Older ones take positions shared by every row."""
    from transformers import modeling_utils

    return hasattr(modeling_utils, "slice_logits_to_keep")


def takes_logits_to_keep(model: Any) -> bool:
    """Whether ``model`` (or the module a DDP wrapper holds) accepts ``logits_to_keep``."""
    return forward_takes(model, "logits_to_keep")


def keep_last_logits(model: Any) -> dict[str, int]:
    """The keyword that has ``model`` compute the last position's logits only, where it takes one
    (a forward run for its keys and values needs no vocabulary-sized output)."""
    return {"logits_to_keep": 1} if takes_logits_to_keep(model) else {}


def model_device(model: Any) -> torch.device:
    return next(model.parameters()).device
