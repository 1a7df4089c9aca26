"""What every language-model policy offers: the `Policy` protocol.

A policy turns many prompts into completions in one call. ``generate`` takes token ids (the
trainer accumulates them turn by turn and never re-templates); ``chat`` takes message lists and
applies the model's chat template. A `Completion` keeps the generated token ids and their
log-probabilities under the sampling distribution (temperature applied, top-p not), which is
what the GRPO importance ratio compares against. The sampling types live in
`searchgym.generation` so that retrievers can drive a policy too.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol, runtime_checkable

from searchgym.errors import ConfigError
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
    "RolloutEngine",
    "TokenizedPolicy",
    "SamplingParams",
    "TextGenerator",
    "TrainablePolicy",
    "check_conversations",
    "check_trainable",
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


@runtime_checkable
class TrainablePolicy(Policy, Protocol):
    """A `Policy` that GRPO can train: its ``generate`` records the sampled tokens' log-probs,
    ``model`` is the torch module those log-probs come from (the trainer updates it in place),
    ``tokenizer`` is a transformers tokenizer with a chat template, and ``reseed`` restarts the
    sampling seeds (see `TokenizedPolicy.reseed`). It is a `RolloutEngine` too (`check_trainable`)."""

    model: Any
    tokenizer: Any

    def reseed(self, seed: int) -> None: ...


def check_trainable(policy: object, backend: str) -> TrainablePolicy:
    """``policy`` if GRPO can train it, else a `ConfigError` that says what it lacks."""
    import torch

    missing = [a for a in ("model", "tokenizer") if getattr(policy, a, None) is None]
    missing += [m for m in ("generate", "chat", "reseed") if not callable(getattr(policy, m, None))]
    if not missing and not isinstance(policy.model, torch.nn.Module):  # type: ignore[attr-defined]
        missing.append("model as a torch.nn.Module")
    if not isinstance(policy, RolloutEngine):
        missing.append("RolloutEngine as a base class (its methods are no-ops to override)")
    if missing:
        raise ConfigError(
            f"policy backend {backend!r} gave a {type(policy).__name__}, which GRPO cannot train: it lacks "
            f"{', '.join(missing)} (see searchgym.agents.policies.base.TrainablePolicy; 'hf' is one)"
        )
    return policy  # type: ignore[return-value]


class RolloutEngine:
    """What a policy that plays training episodes may do besides sampling, as no-op defaults that
    an engine overrides (the CPU engine keeps each episode's keys and values, decodes from an int8
    copy and batches up to ``max_batch_size`` prompts). The trainer and `PolicyAgent` call these
    on every `TokenizedPolicy` (HF, the CPU engine, vLLM) without asking what it is."""

    max_batch_size: int | None = None
    """Prompts decoded in one batch (None: any number): the most episodes worth playing at once."""

    def forget(self, ids: Sequence[int]) -> None:
        """The episode whose token stream is ``ids`` is over: free what was kept of it."""

    def drop_caches(self) -> None:
        """Free everything kept of played episodes (before an update changes the weights)."""

    def float_weights(self) -> AbstractContextManager[None]:
        """A context in which the policy decodes with the float weights the trainer updates."""
        return contextlib.nullcontext()

    def cached_kv(self, ids: Sequence[int], length: int) -> Any:
        """The keys and values of ``ids[:length]`` as the engine computed them, or None."""
        return None

    def load_weights(self, weights: Iterable[tuple[str, Any]]) -> None:
        """Take a trainer's updated weights, ``(name, tensor)`` pairs of the trained model, where
        the engine is not the trained model itself (vLLM). An engine that is has nothing to load."""
        raise TypeError(
            f"{type(self).__name__} plays with the trained model itself and takes no weights; "
            "a separate rollout engine (rollout_engine: vllm) overrides load_weights"
        )


class TokenizedPolicy(RolloutEngine):
    """The part of a policy that holds a tokenizer: ``chat`` templates the conversations and
    calls the subclass's ``generate`` on token ids."""

    name: str
    tokenizer: Any
    seed: int
    _calls: int

    def reseed(self, seed: int) -> None:
        """Restart the seeds of calls without an explicit ``SamplingParams.seed``: the next call
        uses ``seed``, the one after ``seed + 1``, and so on. A multi-turn rollout reseeds once and
        leaves ``params.seed`` None, so each turn draws fresh noise yet a rerun repeats exactly;
        an explicit seed would replay the same draws at every turn."""
        self.seed, self._calls = seed, 0

    def _call_seed(self, params: SamplingParams) -> int:
        """The seed of this ``generate`` call: an explicit one repeats exactly; otherwise successive
        calls differ, reproducibly per run (see `reseed`)."""
        seed = self.seed + self._calls if params.seed is None else params.seed
        self._calls += 1
        return seed

    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[Completion]:
        raise NotImplementedError

    def apply_chat_template(self, conversation: Sequence[Message]) -> list[int]:
        """Token ids of ``conversation`` followed by the assistant's generation prompt."""
        if not getattr(self.tokenizer, "chat_template", None):
            raise ConfigError(f"{self.name!r} has no chat template; use generate() with token ids")
        return list(
            self.tokenizer.apply_chat_template(
                list(conversation), add_generation_prompt=True, tokenize=True, return_dict=False
            )
        )

    def chat(self, conversations: Sequence[Sequence[Message]], params: SamplingParams) -> list[Completion]:
        check_conversations(conversations)
        return self.generate([self.apply_chat_template(c) for c in conversations], params)


def check_token_prompts(prompts: Sequence[Sequence[int]]) -> None:
    """Reject text where token ids are expected, and empty prompts."""
    if isinstance(prompts, (str, bytes)) or any(isinstance(p, str) for p in prompts):
        raise TypeError("generate takes token ids; use chat() for messages")
    if any(len(p) == 0 for p in prompts):
        raise ValueError("every prompt needs at least one token")
