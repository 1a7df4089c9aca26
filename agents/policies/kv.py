"""Key/value caches for `CachedPolicy`: a transformers cache whose layers write into preallocated
buffers, and a store that keeps each episode's cache between ``generate`` calls.

transformers' `DynamicCache` concatenates every new key and value onto the old ones, so each
decoding step copies the whole cache (a third of a step on CPU). `buffer_cache` preallocates
``[batch, kv_heads, capacity, head_dim]`` per layer and writes in place.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from transformers.cache_utils import Cache, DynamicCache, DynamicLayer

KV = list[tuple[torch.Tensor, torch.Tensor]]
"""Per layer, keys and values ``[kv_heads, length, head_dim]`` of one row."""


def forward_takes(model, name: str) -> bool:
    """Whether ``model``'s forward (or that of the module a DDP wrapper holds) takes ``name``."""
    return name in inspect.signature(getattr(model, "module", model).forward).parameters


def with_cache(model, cache: Cache) -> dict[str, Cache]:
    """The keyword argument that hands ``model``'s forward ``cache``: transformers 5.24 renamed
    ``past_key_values`` to ``cache`` (the old name warns, and goes in 5.40); earlier versions and
    models not yet renamed take ``past_key_values``."""
    return {"cache" if forward_takes(model, "cache") else "past_key_values": cache}


def returned_cache(output) -> Cache:
    """The cache a forward returned, under either of its names (see `with_cache`)."""
    cache = getattr(output, "cache", None)
    return cache if cache is not None else output.past_key_values


class _BufferLayer(DynamicLayer):
    """One layer's keys and values: the first ``length`` positions of ``[B, H, capacity, D]``
    buffers (or views of them), filled in place."""

    def __init__(self, keys: torch.Tensor, values: torch.Tensor, length: int) -> None:
        super().__init__()
        self.k_buf, self.v_buf, self.length = keys, values, length
        self.dtype, self.device = keys.dtype, keys.device
        self.is_initialized = True
        self._narrow()

    def _narrow(self) -> None:
        self.keys = self.k_buf[:, :, : self.length]
        self.values = self.v_buf[:, :, : self.length]

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        end = self.length + key_states.shape[-2]
        if end > self.k_buf.shape[-2]:
            raise RuntimeError(f"KV buffer of {self.k_buf.shape[-2]} positions cannot hold {end}")
        self.k_buf[:, :, self.length : end] = key_states
        self.v_buf[:, :, self.length : end] = value_states
        self.length = end
        self._narrow()
        return self.keys, self.values

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        """Keep the rows ``indices``, copying only the filled positions."""
        self.k_buf, self.v_buf = (self._select(buf, indices) for buf in (self.k_buf, self.v_buf))
        self._narrow()

    def _select(self, buf: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
        out = buf.new_empty((len(indices), *buf.shape[1:]))
        out[:, :, : self.length] = buf[indices, :, : self.length]
        return out


class _BufferCache(DynamicCache):
    def __init__(self, layers: list[_BufferLayer]) -> None:
        Cache.__init__(self, layers=layers)


def buffer_cache(buffers: Sequence[tuple[torch.Tensor, torch.Tensor]], length: int) -> DynamicCache:
    """A cache over per-layer ``(keys, values)`` buffers whose first ``length`` positions are filled."""
    return _BufferCache([_BufferLayer(k, v, length) for k, v in buffers])


def empty_buffers(model, batch: int, capacity: int, dtype: torch.dtype, device) -> KV:
    """Zeroed buffers (masked-out padding must not hold NaNs: attention multiplies them by 0)."""
    config = model.config
    heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    shape = (batch, heads, capacity, head_dim)
    return [
        (torch.zeros(shape, dtype=dtype, device=device), torch.zeros(shape, dtype=dtype, device=device))
        for _ in range(config.num_hidden_layers)
    ]


@dataclass
class Entry:
    """The cache of ``ids``: what the model computed for those tokens, per layer."""

    ids: list[int]
    kv: KV

    @property
    def nbytes(self) -> int:
        return sum(k.nbytes + v.nbytes for k, v in self.kv)


def longest_prefix(entries: Sequence[Entry], prompt: list[int]) -> Entry | None:
    """The entry whose ids are the longest prefix of ``prompt`` (None if none is).

    >>> longest_prefix([Entry([1], []), Entry([1, 2], []), Entry([3], [])], [1, 2, 5]).ids
    [1, 2]
    """
    best = None
    for entry in entries:
        n = len(entry.ids)
        if (best is None or n > len(best.ids)) and n <= len(prompt) and prompt[:n] == entry.ids:
            best = entry
    return best


def shared_prefix(entries: Sequence[Entry], prompt: list[int]) -> tuple[Entry | None, int]:
    """The entry that shares the longest run of leading tokens with ``prompt``, and that run's
    length: an episode's own earlier stream (all of it), or another stream that starts with the
    same instructions (the part they share, whose keys and values are the same under a causal
    model). ``(None, 0)`` if no entry shares a token.

    >>> entry, n = shared_prefix([Entry([1, 2, 3, 4], []), Entry([1, 2, 9], [])], [1, 2, 3, 7])
    >>> entry.ids, n
    ([1, 2, 3, 4], 3)
    """
    best, best_n = None, 0
    for entry in entries:
        n = _common_length(entry.ids, prompt)
        if n > best_n:
            best, best_n = entry, n
    return best, best_n


def _common_length(a: list[int], b: list[int]) -> int:
    """How many leading tokens ``a`` and ``b`` share (a binary search over slice comparisons,
    which run in C)."""
    low, high = 0, min(len(a), len(b))
    if a[:high] == b[:high]:
        return high
    while low < high:
        mid = (low + high + 1) // 2
        if a[:mid] == b[:mid]:
            low = mid
        else:
            high = mid - 1
    return low


class PrefixStore:
    """Caches of earlier token streams, newest last, up to ``max_bytes``. An episode's stream
    only grows, so its next prompt starts with everything its previous call saw, and
    `longest_prefix` finds that call's entry. Entries are valid for one set of weights: `clear`
    whenever they change."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.entries: list[Entry] = []

    def clear(self) -> None:
        self.entries = []

    def forget(self, ids: Sequence[int]) -> None:
        """An episode whose stream is ``ids`` has ended: drop the entry of its last call (the
        longest stored prefix of ``ids``), which no later prompt will extend."""
        entry = longest_prefix(self.entries, list(ids))
        self.entries = [e for e in self.entries if e is not entry]

    def discard(self, used: Sequence[Entry]) -> None:
        """Drop the entries a call extends (``used``): the call has copied them into its own
        buffers, and what it computes replaces them."""
        gone = {id(e) for e in used}
        self.entries = [e for e in self.entries if id(e) not in gone]

    def add(self, new: Sequence[Entry]) -> None:
        """Add what a call computed, keeping the newest entries within ``max_bytes``."""
        entries = self.entries + list(new)
        total, kept = 0, []
        for entry in reversed(entries):
            total += entry.nbytes
            if total > self.max_bytes:
                break
            kept.append(entry)
        self.entries = kept[::-1]
