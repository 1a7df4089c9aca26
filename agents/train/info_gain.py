"""Information gain (IGPO): how much each turn raised the policy's belief in the gold answer.

After turn t (and the observation it brought), the gold answer is teacher-forced behind the
episode's tokens: ``p_t = exp(mean_j log π(a_j | context_t, prefix, a_<j))``, where ``prefix`` is
how the env's protocol opens an answer (``<answer>`` in ``tags``). ``p_0`` conditions on the
prompt alone. A turn's information-gain reward is ``p_t − p_{t−1}``; the last turn is rewarded by
the outcome instead. The scores come from the current policy, so this is computed at train time:
an episode's contexts are prefixes of one another, so it costs about one forward over the episode.

    prefix, answer = answer_tokens(tokenizer, env.unwrapped.protocol, task.answers[0])
    gains = information_gain(turn_answer_probabilities(model, episode.trajectory, answer, prefix))
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
from transformers.cache_utils import DynamicCache

from searchgym.agents.policies.agent import Trajectory
from searchgym.agents.policies.kv import KV, buffer_cache, empty_buffers, with_cache
from searchgym.agents.train.scoring import keep_last_logits, model_device, right_pad, target_logprobs
from searchgym.envs.protocols import ActionProtocol
from searchgym.envs.tools import ToolCall
from searchgym.errors import ConfigError

CachedKV = Callable[[Sequence[int], int], KV | None]
"""``cached(ids, n)``: per layer, the keys and values ``[kv_heads, n, head_dim]`` of ``ids[:n]``, or None."""
AnswerRow = tuple[Sequence[int], Sequence[int], Sequence[int]]
"""``(context, prefix, answer)`` token ids: the answer is scored behind the context and prefix."""
_SENTINEL = "searchgymAnswerSentinel"  # plain letters: no protocol escapes or quotes them


def answer_tokens(tokenizer: Any, protocol: ActionProtocol, answer: str) -> tuple[list[int], list[int]]:
    """``(prefix_ids, answer_ids)``: the tokens of the answer call ``protocol`` renders for
    ``answer``, cut where the answer's own text begins. Both are tokenized together, as a model
    writes them, so a space that merges into the answer's first token (`` Oslo``) belongs to the
    answer; what follows the answer (the closing tag) is left out.
    """
    tool = next((t for t in protocol.tools if t.name == "answer"), None)
    if tool is None or len(tool.params) != 1:
        raise ConfigError(f"the {protocol.name!r} protocol has no one-argument 'answer' tool to score")
    if not answer.strip():
        raise ConfigError("the gold answer is empty; information gain needs a non-empty answer")
    param = tool.params[0].name
    opening, closing = protocol.format_call(ToolCall("answer", {param: _SENTINEL})).split(_SENTINEL)
    call = protocol.format_call(ToolCall("answer", {param: answer}))
    if not (call.startswith(opening) and call.endswith(closing)):
        raise ConfigError(f"the {protocol.name!r} protocol renders answers in an unexpected way: {call!r}")
    text = call[: len(call) - len(closing)]  # the opening and the answer as the protocol writes it
    encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    ids, offsets = list(encoded["input_ids"]), encoded["offset_mapping"]
    cut = sum(1 for _, end in offsets if end <= len(opening))
    if cut == len(ids):
        raise ConfigError(f"the answer {answer!r} has no tokens of its own")
    return ids[:cut], ids[cut:]


def answer_logprob(
    model: Any,
    contexts: Sequence[Sequence[int]],
    answer: Sequence[int],
    *,
    prefix: Sequence[int] = (),
    batch_size: int = 8,
) -> torch.Tensor:
    """For each context, the mean over answer tokens j of ``log π(a_j | context, prefix, a_<j)``,
    as a float32 CPU tensor of ``len(contexts)``. ``prefix`` is conditioned on but not averaged.
    Teacher forcing, one forward per mini-batch of right-padded rows, no gradient; the model is
    put in eval mode (dropout off) and restored after."""
    return score_answers(model, [(c, prefix, answer) for c in contexts], batch_size=batch_size)


def score_answers(
    model: Any,
    rows: Sequence[AnswerRow],
    *,
    batch_size: int = 8,
) -> torch.Tensor:
    """`answer_logprob` for rows ``(context, prefix, answer)`` that each have their own prefix
    and answer. Rows are batched longest first, so a batch wastes little on padding."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ConfigError(f"batch_size must be a positive integer, got {batch_size!r}")
    for i, (context, prefix, answer) in enumerate(rows):
        if not answer:
            raise ValueError(f"row {i}: the answer has no tokens")
        if not len(context) + len(prefix):
            raise ValueError(f"row {i}: the first answer token needs a context or prefix to follow")
    out = torch.zeros(len(rows), dtype=torch.float32)
    order = sorted(range(len(rows)), key=lambda i: -sum(map(len, rows[i])))
    with _scoring(model):
        for start in range(0, len(order), batch_size):
            chosen = order[start : start + batch_size]
            out[chosen] = _score_batch(model, [rows[i] for i in chosen])
    return out


@contextlib.contextmanager
def _scoring(model: Any) -> Iterator[None]:
    """Eval mode (dropout off) and no gradient, the model's mode restored after."""
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            yield
    finally:
        model.train(was_training)


def _score_batch(model: Any, rows: Sequence[AnswerRow]) -> torch.Tensor:
    sequences, targets = [], []
    for context, prefix, answer in rows:
        sequences.append([*context, *prefix, *answer])
        start = len(context) + len(prefix)
        targets.append([0] * start + [1] * len(answer))
    input_ids, attention, target_mask = right_pad(sequences, targets, device=model_device(model))
    return _row_means(target_logprobs(model, input_ids, attention, target_mask), target_mask)


def _row_means(logprobs: torch.Tensor, target_mask: torch.Tensor) -> torch.Tensor:
    """Each row's mean of ``logprobs``, the flattened values at ``target_mask``, as float32 on CPU."""
    counts = target_mask.sum(1)
    rows_of = torch.repeat_interleave(torch.arange(len(target_mask), device=counts.device), counts)
    sums = torch.zeros(len(target_mask), device=logprobs.device).index_add_(0, rows_of, logprobs)
    return (sums / counts).float().cpu()


def turn_answer_probabilities(
    model: Any,
    trajectory: Trajectory,
    answer_ids: Sequence[int],
    prefix_ids: Sequence[int] = (),
) -> list[float]:
    """``[p_0, …, p_{T−1}]`` for a trajectory of T turns: the probability of the gold answer
    (``prefix_ids, answer_ids`` from `answer_tokens`) given the prompt alone, then after each
    non-final turn and its observation. For many trajectories use
    `batch_turn_answer_probabilities`."""
    [probabilities] = batch_turn_answer_probabilities(model, [trajectory], [(prefix_ids, answer_ids)])
    return probabilities


def batch_turn_answer_probabilities(
    model: Any,
    trajectories: Sequence[Trajectory],
    answers: Sequence[tuple[Sequence[int], Sequence[int]]],
    cached: CachedKV | None = None,
    *,
    batch_size: int = 16,
) -> list[list[float]]:
    """`turn_answer_probabilities` of every trajectory, ``answers[i]`` being trajectory i's
    ``(prefix_ids, answer_ids)`` as `answer_tokens` returns them.

    A trajectory's turn contexts are prefixes of one another, so its longest is read once into
    keys and values (or taken from ``cached(ids, n)``, the keys and values of ``ids[:n]`` that
    ``model`` computed when it played them: the CPU engine's `cached_kv`). Each turn's answer
    probe (the context's last token, the prefix and the answer) then reads behind that context's
    part of them, ``batch_size`` probes of several trajectories in one forward: an episode costs
    about one forward over its tokens, or a few tokens a turn with ``cached``."""
    if len(trajectories) != len(answers):
        raise ValueError(f"need one answer per trajectory, got {len(answers)} for {len(trajectories)}")
    for traj in trajectories:
        if len(traj.turn_starts) != len(traj.turn_ends):
            raise ValueError("the trajectory has no turn_starts; it was not recorded by PolicyAgent")
    out: list[list[float]] = []
    with _scoring(model):
        for chunk in _chunks(trajectories, batch_size):
            probes, sizes = [], []
            for i in chunk:
                probes += _probes(model, trajectories[i], *answers[i], cached)
                sizes.append(len(trajectories[i].turn_starts))
            scores = _score_probes(model, probes).tolist() if probes else []
            for n in sizes:
                out.append([math.exp(lp) for lp in scores[:n]])
                scores = scores[n:]
    return out


def _chunks(trajectories: Sequence[Trajectory], batch_size: int) -> Iterator[list[int]]:
    """Indices of consecutive trajectories with about ``batch_size`` turns (probes) in all."""
    chunk, turns = [], 0
    for i, traj in enumerate(trajectories):
        chunk.append(i)
        turns += len(traj.turn_starts)
        if turns >= batch_size:
            yield chunk
            chunk, turns = [], 0
    if chunk:
        yield chunk


Probe = tuple[KV | None, int, list[int], int, Sequence[int]]
"""``(keys and values, context length, query ids, prefix length, answer ids)``: one turn's
answer, read behind the first ``context length`` positions of its episode's keys and values."""


def _probes(
    model: Any, traj: Trajectory, prefix: Sequence[int], answer: Sequence[int], cached: CachedKV | None
) -> list[Probe]:
    """The answer probes of a trajectory's turns, sharing the keys and values of its longest
    context but for that context's last token, which each probe reads."""
    if not answer:
        raise ValueError("the answer has no tokens")
    tokens = traj.prompt_ids + traj.ids
    cuts = [len(traj.prompt_ids) + s for s in traj.turn_starts]
    if min(cuts, default=1) < 1:
        raise ValueError("the first answer token needs a context to follow: the prompt is empty")
    longest = max(cuts, default=1) - 1
    kv = None
    if longest:
        kv = cached(tokens, longest) if cached is not None else None
        if kv is None:
            cache = DynamicCache()
            inputs = {"input_ids": torch.tensor([tokens[:longest]], device=model_device(model))}
            model(**inputs, use_cache=True, **with_cache(model, cache), **keep_last_logits(model))
            kv = [(layer.keys[0], layer.values[0]) for layer in cache.layers]
    return [(kv, cut - 1, [tokens[cut - 1], *prefix, *answer], len(prefix), answer) for cut in cuts]


def _score_probes(model: Any, probes: Sequence[Probe]) -> torch.Tensor:
    """The mean log-probability of each probe's answer, all probes in one forward: their contexts'
    keys and values left-padded into one buffer, their queries right-padded behind it."""
    device = model_device(model)
    width = max(length for _, length, *_ in probes)
    span = max(len(query) for _, _, query, *_ in probes)
    n = len(probes)
    buffers = empty_buffers(model, n, width + span, next(model.parameters()).dtype, device)
    ids = torch.zeros(n, span, dtype=torch.long)
    attention = torch.zeros(n, width + span, dtype=torch.long)
    positions = torch.zeros(n, span, dtype=torch.long)
    target = torch.zeros(n, span, dtype=torch.bool)
    for r, (kv, length, query, prefix_length, answer) in enumerate(probes):
        for (k, v), (kept_k, kept_v) in zip(buffers, kv if length else []):
            k[r, :, width - length : width] = kept_k[:, :length]
            v[r, :, width - length : width] = kept_v[:, :length]
        ids[r, : len(query)] = torch.tensor(query)
        attention[r, width - length : width + len(query)] = 1
        positions[r] = torch.arange(length, length + span)
        target[r, 1 + prefix_length : 1 + prefix_length + len(answer)] = True
    cache = buffer_cache(buffers, width)
    ids, attention, target, positions = (t.to(device) for t in (ids, attention, target, positions))
    logprobs = target_logprobs(
        model, ids, attention, target, position_ids=positions, use_cache=True, **with_cache(model, cache)
    )
    return _row_means(logprobs, target)


def information_gain(probabilities: Sequence[float]) -> list[float]:
    """Turn rewards ``r_t = p_t − p_{t−1}`` for t = 1 … T−1, from `turn_answer_probabilities`'
    ``[p_0, …, p_{T−1}]`` (the last turn is rewarded by the outcome, not here).

    >>> [round(r, 2) for r in information_gain([0.1, 0.4, 0.3])]
    [0.3, -0.1]
    >>> information_gain([0.2])
    []
    """
    return [p - q for q, p in zip(probabilities, probabilities[1:])]
