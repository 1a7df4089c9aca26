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
from searchgym.agents.policies.kv import KV
from searchgym.agents.train.scoring import model_device, right_pad, takes_logits_to_keep, token_logprobs
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
    logprobs = token_logprobs(model, input_ids, attention, target_mask)
    counts = target_mask.sum(1)
    rows_of = torch.repeat_interleave(torch.arange(len(rows), device=counts.device), counts)
    sums = torch.zeros(len(rows), device=logprobs.device).index_add_(0, rows_of, logprobs)
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
) -> list[list[float]]:
    """`turn_answer_probabilities` of every trajectory, ``answers[i]`` being trajectory i's
    ``(prefix_ids, answer_ids)`` as `answer_tokens` returns them. ``cached(ids, n)`` may give
    the keys and values of ``ids[:n]`` that ``model`` computed when it played them (the CPU
    engine's `cached_kv`); where it does, an episode is not read again."""
    if len(trajectories) != len(answers):
        raise ValueError(f"need one answer per trajectory, got {len(answers)} for {len(trajectories)}")
    for traj in trajectories:
        if len(traj.turn_starts) != len(traj.turn_ends):
            raise ValueError("the trajectory has no turn_starts; it was not recorded by PolicyAgent")
    with _scoring(model):
        return [
            [math.exp(lp) for lp in _turn_logprobs(model, traj, prefix, answer, cached)]
            for traj, (prefix, answer) in zip(trajectories, answers)
        ]


def _turn_logprobs(
    model: Any, traj: Trajectory, prefix: Sequence[int], answer: Sequence[int], cached: CachedKV | None
) -> list[float]:
    """The answer's mean log-probability behind each turn's context. The contexts are prefixes of
    one another, so the longest is read once into a key/value cache (or taken from ``cached``),
    and each turn, latest first, crops the cache to its context and reads only its last token,
    the prefix and the answer: an episode costs about one forward over its tokens instead of
    one per turn, or a few tokens a turn with ``cached``."""
    if not answer:
        raise ValueError("the answer has no tokens")
    tokens = traj.prompt_ids + traj.ids
    cuts = [len(traj.prompt_ids) + s for s in traj.turn_starts]
    if min(cuts, default=1) < 1:
        raise ValueError("the first answer token needs a context to follow: the prompt is empty")
    cache = DynamicCache()
    if cuts and max(cuts) > 1:
        kept = cached(tokens, max(cuts) - 1) if cached is not None else None
        if kept is None:
            _last_logits(model, tokens[: max(cuts) - 1], cache, 1)
        for layer, (keys, values) in enumerate(kept or []):
            cache.update(keys[None], values[None], layer)
    scores = {}
    for cut in sorted(set(cuts), reverse=True):
        cache.crop(cut - 1 - cache.get_seq_length())  # a negative count: drop what came after
        logits = _last_logits(model, [tokens[cut - 1], *prefix, *answer], cache, len(answer) + 1)
        target = torch.tensor(answer, device=logits.device)
        # position j of the kept logits predicts the answer's token j; the last predicts nothing
        scores[cut] = float(-torch.nn.functional.cross_entropy(logits[:-1].float(), target))
    return [scores[cut] for cut in cuts]


def _last_logits(model: Any, ids: Sequence[int], cache: DynamicCache, keep: int) -> torch.Tensor:
    """The logits of the last ``keep`` of ``ids`` read behind ``cache`` (which they extend)."""
    inputs = {"input_ids": torch.tensor([list(ids)], device=model_device(model)), "past_key_values": cache}
    if takes_logits_to_keep(model):
        return model(**inputs, use_cache=True, logits_to_keep=keep).logits[0]
    return model(**inputs, use_cache=True).logits[0, -keep:]


def information_gain(probabilities: Sequence[float]) -> list[float]:
    """Turn rewards ``r_t = p_t − p_{t−1}`` for t = 1 … T−1, from `turn_answer_probabilities`'
    ``[p_0, …, p_{T−1}]`` (the last turn is rewarded by the outcome, not here).

    >>> [round(r, 2) for r in information_gain([0.1, 0.4, 0.3])]
    [0.3, -0.1]
    >>> information_gain([0.2])
    []
    """
    return [p - q for q, p in zip(probabilities, probabilities[1:])]
