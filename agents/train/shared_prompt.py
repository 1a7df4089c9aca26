"""Reading the prompt that a GRPO group's episodes share once per update, not once per episode.

The episodes of a group start with the same prompt (the instructions and the question), about a
third of a two-hop episode's tokens. `SharedPrompt` runs it through the model once, with
gradient, and hands every episode's forward its keys and values as leaves of their own: each
backward pass leaves the prompt's share of the gradient on those leaves, and `backward` sends
their sum through the prompt's forward once. The gradient is the one a whole read of every
episode gives (tests/agents/train/test_shared_prompt.py checks it), for a forward and backward over the
prompt instead of one per episode.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from transformers.cache_utils import DynamicCache

from searchgym.agents.policies.kv import returned_cache
from searchgym.agents.train.loss import Sample
from searchgym.agents.train.scoring import keep_last_logits


def by_group(groups: Sequence[Sequence[Sample]]) -> list[tuple[tuple[int, ...], list[Sample]]]:
    """The samples of a step's groups in runs that share a prompt, as ``(prompt, continuations)``:
    a group's samples share theirs (its task's instructions and question), and so do the groups of
    a task played twice in a step (dynamic sampling may draw it again), which read it once.
    ``prompt`` is all but the last token before a sample's first policy token, each continuation
    the sample from that last token on. Samples that share their prompt with no other stay whole,
    last, under prompt ``()``.

    >>> a, b = Sample([1, 2, 3, 4], 2, [1, 0], [0, 0], [1, 1]), Sample([1, 2, 3], 2, [1], [0], [1])
    >>> c = Sample([5, 6], 1, [1], [0], [1])
    >>> [(prompt, [s.ids for s in part]) for prompt, part in by_group([[a, b], [c]])]
    [((1,), [[2, 3, 4], [2, 3]]), ((), [[5, 6]])]
    """
    runs: dict[tuple[int, ...], list[Sample]] = {}
    for group in groups:
        for sample in group:
            runs.setdefault(tuple(sample.ids[: sample.start - 1]), []).append(sample)
    parts, whole = [], []
    for prompt, run in runs.items():
        if len(run) < 2 or not prompt:
            whole += run
        else:
            parts.append((prompt, [continuation(s, len(prompt)) for s in run]))
    return parts + [((), whole)] if whole else parts


def continuation(sample: Sample, start: int) -> Sample:
    """``sample`` from token ``start`` on, whose first token is the prompt's last."""
    return Sample(sample.ids[start:], 1, sample.mask, sample.old_logprobs, sample.advantages, sample.sampled)


class SharedPrompt:
    """A prompt read once: ``cache(n)`` gives a batch of ``n`` continuations its keys and values,
    and `backward` sends the gradient they gathered back through the prompt's forward."""

    def __init__(self, model: Any, prompt: Sequence[int], accelerator: Any) -> None:
        device = accelerator.device
        with accelerator.autocast():
            out = model(
                input_ids=torch.tensor([list(prompt)], device=device),
                use_cache=True,
                **keep_last_logits(model),
            )
        self.outputs = [(layer.keys, layer.values) for layer in returned_cache(out).layers]
        self.leaves = [
            tuple(t.detach().requires_grad_(t.requires_grad) for t in pair) for pair in self.outputs
        ]

    def cache(self, batch: int) -> DynamicCache:
        cache = DynamicCache()
        for layer, (keys, values) in enumerate(self.leaves):
            cache.update(keys.expand(batch, -1, -1, -1), values.expand(batch, -1, -1, -1), layer)
        return cache

    def backward(self) -> None:
        pairs = [
            (out, leaf.grad)
            for outs, leaves in zip(self.outputs, self.leaves)
            for out, leaf in zip(outs, leaves)
            if leaf.grad is not None
        ]
        if pairs:
            torch.autograd.backward([out for out, _ in pairs], [grad for _, grad in pairs])
