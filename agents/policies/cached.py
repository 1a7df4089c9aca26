"""`CachedPolicy`: `HFPolicy` with its own decoding loop, for fast multi-turn rollouts on CPU.

`HFPolicy` hands every turn's whole token stream to ``model.generate``, which prefills it from
scratch; on CPU prefill is most of a multi-turn rollout. This loop differs in three ways, each
behind the same ``generate(prompts, params)``:

- **Cache reuse by prefix.** After a call, each row's keys and values are kept (a `PrefixStore`,
  bounded by ``cache_bytes``). A later prompt that starts with a kept stream (the next turn of
  the same episode: prompt + completion + observation) prefills only the new tokens; a prompt
  that shares only its start with a kept stream or an earlier row of the call (every episode's
  system prompt and instructions; a GRPO group's identical prompts) reuses the shared part's keys
  and values, which a causal model computes alike for both. An ended episode's cache is freed when
  its `PolicyAgent` starts the next one (`forget`); a continuing episode's, once the call has copied
  it into its batch buffers (before decoding, so that the two never add up). The cache belongs to
  one set of weights: it is dropped whenever a parameter's version counter moved since the last
  call (an optimizer step or ``load_state_dict`` moves it; an in-place write through ``param.data`` does
  not, so call `drop_caches` after one), not on `reseed`, so that a trainer's refill rounds keep
  the first round's episodes. Until then the trainer reads a played episode's keys and values
  back (`cached_kv`) for its information gain, instead of running the episode through the model
  again.
- **Preallocated caches.** Rows are prefilled one by one (prefill is compute-bound on CPU, so
  batching it gains little and padding costs much) straight into a left-aligned batch buffer,
  then decoded together, each new key written in place (`buffer_cache`).
- **Finished rows leave the batch**: once a quarter of the rows have stopped, they are dropped
  from the cache, so the rest decode a smaller batch.

``rollout_dtype`` (e.g. ``"bfloat16"``; ``"auto"``: bfloat16 where the device computes it
natively, else none; ``"int8"``: the decoder blocks' linear layers in int8 on CPU, see
`agents/policies/int8.py`) generates with a copy of the model in that dtype, refreshed whenever the
weights change; ``policy.model`` itself, the one the trainer updates, keeps ``dtype``. The
trainer's importance ratios then compare the updated model with the copy that sampled. Greedy
decoding, stop strings, end-of-sequence handling and the recorded log-probs (of each sampled
token under ``softmax(logits / temperature)``) follow `HFPolicy`.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator, Sequence

import torch

from searchgym.agents.policies.base import Completion, SamplingParams, check_token_prompts
from searchgym.agents.policies.hf import HFPolicy
from searchgym.agents.policies.int8 import int8_copy
from searchgym.agents.policies.kv import (
    KV,
    Entry,
    PrefixStore,
    buffer_cache,
    empty_buffers,
    shared_prefix,
    with_cache,
)
from searchgym.agents.policies.models import DEFAULT_MODEL
from searchgym.errors import ConfigError


def bf16_supported() -> bool:
    """Whether this CPU computes bfloat16 matmuls natively (AVX512-BF16 or AMX), where they run
    about twice as fast as float32."""
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def native_bf16(device: torch.device) -> bool:
    """Whether ``device`` computes bfloat16 natively: a GPU that supports it, or `bf16_supported`."""
    return torch.cuda.is_bf16_supported() if device.type == "cuda" else bf16_supported()


def _dtype(name: str | torch.dtype | None, device: torch.device) -> torch.dtype | str | None:
    """``rollout_dtype`` as a dtype or ``"int8"``; ``"auto"``: bfloat16 where ``device`` computes
    it natively."""
    if name == "auto":
        return torch.bfloat16 if native_bf16(device) else None
    if name == "int8":
        if device.type != "cpu":
            raise ConfigError("rollout_dtype: int8 runs on CPU only; on a GPU use bfloat16 (or vLLM)")
        return name
    if isinstance(name, str):
        if not isinstance(getattr(torch, name, None), torch.dtype):
            raise ConfigError(
                f"rollout_dtype must be a torch dtype such as 'bfloat16', 'int8' or 'auto'; got {name!r}"
            )
        return getattr(torch, name)
    return name


class CachedPolicy(HFPolicy):
    """An `HFPolicy` that keeps each episode's KV cache across turns (see the module docstring)."""

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        device: str | None = None,
        dtype: str | torch.dtype | None = None,
        rollout_dtype: str | torch.dtype | None = None,
        max_batch_size: int = 64,
        cache_bytes: int = 4 << 30,
        seed: int = 0,
        show_progress: bool = False,
    ) -> None:
        super().__init__(
            model,
            device=device,
            dtype=dtype,
            max_batch_size=max_batch_size,
            seed=seed,
            show_progress=show_progress,
        )
        self._rollout_dtype = _dtype(rollout_dtype, self.device)
        self._copy = None
        self._refresh_copy()
        self.store = PrefixStore(cache_bytes)
        self._weights: tuple[int, ...] | None = self._weights_now()  # those the copy was made from
        self._use_copy = True

    @contextlib.contextmanager
    def float_weights(self) -> Iterator[None]:
        """Decode with float weights for the duration: ``policy.model`` in place of an int8 copy
        (a bfloat16 copy stays), so that an evaluation measures the weights the trainer updates,
        not their int8 approximation. The kept caches, which belong to one model, are dropped on
        the way in and out."""
        if self._rollout_dtype != "int8":
            yield
            return
        self.store.clear()
        self._use_copy = False
        try:
            yield
        finally:
            self.store.clear()
            self._use_copy = True

    def forget(self, ids: Sequence[int]) -> None:
        """The episode whose token stream is ``ids`` has ended: free its keys and values now
        (`PolicyAgent` calls this when it starts its next episode), instead of keeping them until
        newer episodes push them out of ``cache_bytes``."""
        self.store.forget(ids)

    def cached_kv(self, ids: Sequence[int], length: int) -> KV | None:
        """The keys and values of ``ids[:length]`` as this engine computed them for a stream it
        still keeps (per layer ``[kv_heads, length, head_dim]``, in ``policy.model``'s dtype), so
        that the trainer's information gain need not read the episode again; None if no kept
        stream starts with them, or the weights changed since they were computed."""
        if self._weights_now() != self._weights:
            return None
        entry, shared = shared_prefix(self.store.entries, list(ids[:length]))
        if entry is None or shared < length:
            return None
        dtype = self.model.dtype
        return [(k[:, :length].to(dtype), v[:, :length].to(dtype)) for k, v in entry.kv]

    def drop_caches(self) -> None:
        """Free the kept keys and values now, rather than at the next call after the weights
        change (the trainer calls this before an update, whose activations need the memory; call
        it after writing weights in place through ``param.data``, which no version counter sees:
        the rollout copy, if any, is then refreshed at the next call too)."""
        self.store.clear()
        self._weights = None

    def _weights_now(self) -> tuple[int, ...]:
        """The parameters' version counters: any optimizer step or ``load_state_dict`` moves one."""
        return tuple(p._version for p in self.model.parameters())

    def _generator_model(self) -> torch.nn.Module:
        """The model to decode with, after dropping caches (and refreshing the copy) if the
        weights changed since the last call."""
        weights = self._weights_now()
        if weights != self._weights:
            self.store.clear()
            self._refresh_copy()
            self._weights = weights  # copying out of the model leaves its versions as they were
        return self._copy if self._copy is not None and self._use_copy else self.model

    def _refresh_copy(self) -> None:
        """Make or update the ``rollout_dtype`` copy from ``policy.model``'s weights: an int8 copy
        is quantized anew, one in another float dtype is made once and then loaded in place."""
        if self._rollout_dtype == "int8":
            self._copy = int8_copy(self.model)
        elif self._copy is not None:
            with torch.no_grad():
                self._copy.load_state_dict(self.model.state_dict())
        elif self._rollout_dtype is not None and self._rollout_dtype != self.model.dtype:
            self._copy = copy.deepcopy(self.model).to(self._rollout_dtype).eval().requires_grad_(False)

    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[Completion]:
        check_token_prompts(prompts)
        generator = torch.Generator(device=self.device).manual_seed(self._call_seed(params))
        model = self._generator_model()
        out: list[Completion] = []
        for start in range(0, len(prompts), self.max_batch_size):
            rows = [list(p) for p in prompts[start : start + self.max_batch_size]]
            out.extend(self._decode(model, rows, params, generator))
        return out

    @torch.inference_mode()
    def _decode(self, model, prompts: list[list[int]], params: SamplingParams, generator) -> list[Completion]:
        n_rows, width = len(prompts), max(map(len, prompts))
        buffers = empty_buffers(model, n_rows, width + params.max_new_tokens, model.dtype, self.device)
        logits, used, local = [], [], []
        for i, prompt in enumerate(prompts):  # prefill, row by row, into the left-aligned buffers
            start = width - len(prompt)
            row = [(k[i : i + 1, :, start:], v[i : i + 1, :, start:]) for k, v in buffers]
            logits.append(self._prefill(model, prompt, row, local, used))
            local.append(Entry(prompt, [(k[0, :, : len(prompt)], v[0, :, : len(prompt)]) for k, v in row]))
        self.store.discard(used)  # copied into the buffers: freed before decoding, not after
        del used

        cache = buffer_cache(buffers, width)
        attention = torch.zeros(n_rows, width + params.max_new_tokens, dtype=torch.long, device=self.device)
        for i, prompt in enumerate(prompts):
            attention[i, width - len(prompt) : width] = 1
        positions = torch.tensor([len(p) for p in prompts], device=self.device)
        slots = list(range(n_rows))  # the prompt each batch row holds
        done_in_batch: list[int] = []  # batch rows that stopped but still hold a slot
        ids: list[list[int]] = [[] for _ in prompts]
        logprobs: list[list[float]] = [[] for _ in prompts]
        new: list[Entry] = []
        next_logits = torch.cat(logits)
        stops = self.eos_token_ids | {self.tokenizer.pad_token_id}
        cached = with_cache(model, cache)  # the same cache object throughout, rows selected in place
        for step in range(params.max_new_tokens):
            tokens, token_logprobs = self._choose(next_logits, params, generator)
            for b, i in enumerate(slots):
                if b in done_in_batch:
                    continue
                ids[i].append(int(tokens[b]))
                logprobs[i].append(float(token_logprobs[b]))
                if self._stopped(ids[i], params, stops):
                    done_in_batch.append(b)
                    new.append(Entry(prompts[i] + ids[i][:-1], _row_kv(cache, b, width - len(prompts[i]))))
            if len(done_in_batch) == len(slots):
                break
            if len(done_in_batch) >= max(1, len(slots) // 4):  # free their slots
                keep = [b for b in range(len(slots)) if b not in done_in_batch]
                index = torch.tensor(keep, device=self.device)
                cache.batch_select_indices(index)
                attention, positions, tokens = attention[index], positions[index], tokens[index]
                slots, done_in_batch = [slots[b] for b in keep], []
            attention[:, width + step] = 1
            out = model(
                input_ids=tokens[:, None],
                attention_mask=attention[:, : width + step + 1],
                position_ids=positions[:, None],
                use_cache=True,
                **cached,
            )
            positions = positions + 1
            next_logits = out.logits[:, -1]
        self.store.add(new)
        return [self._completion(row, lp, params) for row, lp in zip(ids, logprobs)]

    def _prefill(self, model, prompt: list[int], row, local: list[Entry], used: list[Entry]) -> torch.Tensor:
        """Compute ``prompt``'s keys and values into ``row`` (reusing the longest run of leading
        tokens it shares with a cached stream, from the store or from an earlier row of this
        call) and return its last logits."""
        entry, shared = shared_prefix(self.store.entries + local, prompt)
        reused = min(shared, len(prompt) - 1)
        if entry is not None:
            if shared == len(entry.ids) and entry not in local:
                used.append(entry)  # this prompt extends it: the new entry replaces it
            for (k, v), (ek, ev) in zip(row, entry.kv):
                k[0, :, :reused] = ek[:, :reused]
                v[0, :, :reused] = ev[:, :reused]
        rest = torch.tensor([prompt[reused:]], device=self.device)
        cache = with_cache(model, buffer_cache(row, reused))
        return model(input_ids=rest, use_cache=True, logits_to_keep=1, **cache).logits[:, -1]

    def _choose(self, logits: torch.Tensor, params: SamplingParams, generator) -> tuple[torch.Tensor, ...]:
        """The next token of every row and its log-prob under ``softmax(logits / temperature)``;
        top-p as transformers applies it (the smallest set of tokens with mass >= top_p)."""
        logits = logits.float()
        if params.temperature == 0:
            tokens = logits.argmax(-1)
            return tokens, torch.log_softmax(logits, -1).gather(1, tokens[:, None])[:, 0]
        scaled = logits / params.temperature
        logp = torch.log_softmax(scaled, -1)
        if params.top_p < 1:
            ordered, order = scaled.sort(-1)
            drop = ordered.softmax(-1).cumsum(-1) <= 1 - params.top_p
            drop[:, -1] = False
            scaled = scaled.masked_fill(drop.scatter(1, order, drop), float("-inf"))
        tokens = torch.multinomial(scaled.softmax(-1), 1, generator=generator)[:, 0]
        return tokens, logp.gather(1, tokens[:, None])[:, 0]

    def _stopped(self, ids: list[int], params: SamplingParams, stops: set[int]) -> bool:
        """Whether a row ends after its last token: `HFPolicy`'s rules (an end-of-sequence or pad
        token in ``stops``, a stop string in the last few tokens' text, the length limit)."""
        if ids[-1] in stops:
            return True
        if params.stop:
            tail = self.tokenizer.decode(ids[-(max(map(len, params.stop)) + 1) :], skip_special_tokens=False)
            if any(s in tail for s in params.stop):
                return True
        return len(ids) >= params.max_new_tokens


def _row_kv(cache, row: int, start: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """A copy of batch row ``row``'s filled cache from position ``start`` (past its left padding)."""
    return [(x.keys[row, :, start:].clone(), x.values[row, :, start:].clone()) for x in cache.layers]
