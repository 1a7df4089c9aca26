"""What every language-model policy offers: the `Policy` protocol.

A policy turns many prompts into completions in one call. ``generate`` takes token ids (the
trainer accumulates them turn by turn and never re-templates); ``chat`` takes message lists and
applies the model's chat template. A `Completion` keeps the generated token ids and their
log-probabilities under the sampling distribution (temperature applied, top-p not), which is
what the GRPO importance ratio compares against. The sampling types live in
`searchgym.generation` so that retrievers can drive a policy too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from searchgym.generation import (
    Completion,
    FinishReason,
    Message,
    SamplingParams,
    TextGenerator,
    check_conversations,
)

__all__ = [
    "Completion",
    "FinishReason",
    "Message",
    "Policy",
    "SamplingParams",
    "TextGenerator",
    "check_conversations",
]


@runtime_checkable
class Policy(Protocol):
    """A language model that completes many prompts at once."""

    name: str

    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[Completion]:
        """Complete prompts given as token ids."""
        ...

    def chat(self, conversations: Sequence[Sequence[Message]], params: SamplingParams) -> list[Completion]:
        """Complete conversations (``[{"role": ..., "content": ...}, ...]``) as the assistant."""
        ...
