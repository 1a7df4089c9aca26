"""Text generation types shared by policies (agents) and model-backed retrievers.

`SamplingParams` say how to sample, a `Completion` is what came out, and `TextGenerator` is the
one method a retriever needs from a model (`chat`). Every policy in `searchgym.agents` satisfies
it, so a retriever can use a policy without importing the agents layer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

from searchgym.errors import ConfigError

Message = dict[str, str]
FinishReason = Literal["stop", "length"]


@dataclass(frozen=True)
class SamplingParams:
    """How to sample. ``temperature`` 0 is greedy. Generation ends at the end-of-sequence token,
    after any of the ``stop`` strings (which are kept in the text), or at ``max_new_tokens``.
    ``seed`` makes one call repeatable without touching global random state; calls that share it
    replay the same draws, so a multi-turn rollout leaves it None and reseeds the policy once
    (``TokenizedPolicy.reseed``) instead."""

    max_new_tokens: int = 256
    temperature: float = 1.0
    top_p: float = 1.0
    stop: tuple[str, ...] = ()
    seed: int | None = None

    def __post_init__(self) -> None:
        if isinstance(self.max_new_tokens, bool) or not isinstance(self.max_new_tokens, int):
            raise ConfigError(f"max_new_tokens must be an integer, got {self.max_new_tokens!r}")
        if self.max_new_tokens < 1:
            raise ConfigError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if self.temperature < 0:
            raise ConfigError(f"temperature must be >= 0 (0 is greedy), got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ConfigError(f"top_p must be in (0, 1], got {self.top_p}")
        if isinstance(self.stop, str):
            raise ConfigError("stop must be a sequence of strings; wrap a single stop string in a tuple")
        if any(not s for s in self.stop):
            raise ConfigError("stop strings must be non-empty")
        object.__setattr__(self, "stop", tuple(self.stop))


@dataclass
class Completion:
    """One generated continuation. ``token_ids`` are exactly the tokens the model produced (an
    end-of-sequence token included when it produced one); ``logprobs`` has one entry per token,
    or is empty when the backend does not report them."""

    text: str
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    finish_reason: FinishReason = "stop"


@runtime_checkable
class TextGenerator(Protocol):
    """Anything that completes conversations as an assistant (every policy does)."""

    def chat(self, conversations: Sequence[Sequence[Message]], params: SamplingParams) -> list[Completion]:
        """Complete conversations (``[{"role": ..., "content": ...}, ...]``) as the assistant."""
        ...


def check_conversations(conversations: Sequence[Sequence[Message]]) -> None:
    """Reject inputs that would otherwise fail deep inside a tokenizer or a server."""
    if isinstance(conversations, (str, dict)):
        raise TypeError("chat takes a sequence of conversations, each a list of messages")
    for i, conv in enumerate(conversations):
        if isinstance(conv, (str, dict)) or not conv:
            raise TypeError(f"conversation {i} must be a non-empty list of messages")
        for msg in conv:
            if not isinstance(msg, dict) or not {"role", "content"} <= set(msg):
                raise TypeError(f"conversation {i}: every message needs 'role' and 'content', got {msg!r}")


def request_seed(seed: int, index: int) -> int:
    """The seed of request ``index`` of a call seeded with ``seed`` (the first keeps it), so
    identical prompts in one call sample differently.

    >>> request_seed(7, 0), request_seed(7, 1) != request_seed(8, 0)
    (7, True)
    """
    return (seed + index * 1_000_003) % 2**31
