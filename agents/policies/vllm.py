"""`VLLMPolicy`: offline generation with vLLM's ``LLM`` engine on GPUs (the ``gpu`` extra).

It has `HFPolicy`'s interface: ``generate`` on token ids, ``chat`` through the tokenizer's chat
template, and a public ``tokenizer`` so `PolicyAgent` keeps exact token streams. Each request
returns its token ids, the sampled tokens' log-probs (``logprobs=0`` asks vLLM for the sampled
token only) and the text with its stop string kept (``include_stop_str_in_output``). Where vLLM
supports it (0.10.2+) the engine reports ``processed_logprobs``: temperature applied, as
`Completion` documents, though unlike `HFPolicy` also top-p/top-k renormalisation; the two agree
at ``top_p`` 1. Older vLLM reports log-probs before temperature (equal at temperature 1).

`load_weights` pushes a trainer's updated weights into the running engine: directly into the
model where the engine runs in this process (vLLM V0, or V1 with
``VLLM_ENABLE_V1_MULTIPROCESSING=0``), else through ``LLM.apply_model`` in every worker (V1's
default multiprocess engine sends the function by pickle, which vLLM only allows with
``VLLM_ALLOW_INSECURE_SERIALIZATION=1`` set before the engine starts).

What was verified where: vLLM cannot run on the CPU machine this was written on. The calls follow
vLLM's documented API (``LLM``, ``SamplingParams``, ``vllm.inputs.TokensPrompt``,
``get_tokenizer``, ``apply_model``, ``reset_prefix_cache``) and trl's colocated weight sync;
tests/agents/policies/test_vllm_policy.py checks, against a fake ``vllm`` module that records the calls,
the import guard, the engine and sampling arguments built, the mapping of outputs to
`Completion` and both weight-loading routes. It has not been run on a GPU with a real engine.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable, Sequence
from typing import Any

from searchgym.agents.policies.base import (
    Completion,
    SamplingParams,
    TokenizedPolicy,
    check_token_prompts,
)
from searchgym.agents.policies.models import DEFAULT_MODEL, resolve_model
from searchgym.errors import PolicyError, import_optional
from searchgym.generation import request_seed  # the same per-request seeds as OpenAIPolicy


class VLLMPolicy(TokenizedPolicy):
    """Generate with ``vllm.LLM`` (``model`` is a hub id, a local directory, or the alias
    ``smollm2-135m-instruct``; see `searchgym.agents.policies.models`). ``llm_kwargs`` go to ``vllm.LLM``
    unchanged (and override the defaults set here)."""

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        tensor_parallel_size: int = 1,
        gpu_memory_utilization: float = 0.9,
        dtype: str = "auto",
        seed: int = 0,
        max_model_len: int | None = None,
        **llm_kwargs: Any,
    ) -> None:
        vllm = import_optional("vllm", "gpu")
        self._SamplingParams = vllm.SamplingParams
        self._TokensPrompt = import_optional("vllm.inputs", "gpu").TokensPrompt
        kwargs: dict[str, Any] = {
            "model": resolve_model(model),
            "tensor_parallel_size": tensor_parallel_size,
            "gpu_memory_utilization": gpu_memory_utilization,
            "dtype": dtype,
            "seed": seed,
        }
        if max_model_len is not None:
            kwargs["max_model_len"] = max_model_len
        if _engine_accepts(vllm, "logprobs_mode"):
            kwargs["logprobs_mode"] = "processed_logprobs"  # temperature applied, as Completion says
        self.name = model
        self.seed = seed
        self.llm = vllm.LLM(**{**kwargs, **llm_kwargs})
        self.tokenizer = self.llm.get_tokenizer()
        self._calls = 0

    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[Completion]:
        check_token_prompts(prompts)
        if not prompts:
            return []
        seed = self._call_seed(params)
        inputs = [self._TokensPrompt(prompt_token_ids=[int(t) for t in p]) for p in prompts]
        sampling = [self._sampling(params, request_seed(seed, i)) for i in range(len(prompts))]
        outputs = self.llm.generate(inputs, sampling_params=sampling, use_tqdm=False)
        return [_completion(output.outputs[0]) for output in outputs]

    def _sampling(self, params: SamplingParams, seed: int) -> Any:
        return self._SamplingParams(
            n=1,
            max_tokens=params.max_new_tokens,
            temperature=params.temperature,
            top_p=params.top_p,
            stop=list(params.stop),
            include_stop_str_in_output=True,
            logprobs=0,  # the sampled token's log-prob only
            seed=seed,
        )

    def load_weights(self, weights: Iterable[tuple[str, Any]]) -> None:
        """Load ``(name, tensor)`` pairs (e.g. ``model.state_dict().items()`` of the trained
        copy) into the engine's model, then drop cached prefixes computed with the old weights."""
        weights = list(weights)
        model = _in_process_model(self.llm)
        if model is not None:
            model.load_weights(weights)
        elif hasattr(self.llm, "apply_model"):
            on_cpu = [(name, tensor.detach().cpu()) for name, tensor in weights]
            self.llm.apply_model(functools.partial(_load_into, weights=on_cpu))
        else:
            raise PolicyError(
                "this vLLM version exposes neither its model in this process nor LLM.apply_model, so "
                "weights cannot be updated in place; upgrade vllm or rebuild the policy from a checkpoint"
            )
        if hasattr(self.llm, "reset_prefix_cache"):
            self.llm.reset_prefix_cache()


def _completion(output: Any) -> Completion:
    """A vLLM ``CompletionOutput`` as a `Completion`."""
    ids = [int(t) for t in output.token_ids]
    logprobs = [] if output.logprobs is None else [step[t].logprob for t, step in zip(ids, output.logprobs)]
    finish = "length" if output.finish_reason == "length" else "stop"
    return Completion(text=output.text, token_ids=ids, logprobs=logprobs, finish_reason=finish)


def _engine_accepts(vllm: Any, option: str) -> bool:
    engine_args = getattr(vllm, "EngineArgs", None)
    if engine_args is None or not dataclasses.is_dataclass(engine_args):
        return False
    return option in {f.name for f in dataclasses.fields(engine_args)}


def _in_process_model(llm: Any) -> Any:
    """The engine's model when it lives in this process (vLLM V0's executor), else None."""
    try:
        return llm.llm_engine.model_executor.driver_worker.model_runner.model
    except AttributeError:
        return None


def _load_into(model: Any, *, weights: list[tuple[str, Any]]) -> None:
    """Runs inside each vLLM worker (module level, so it pickles by reference)."""
    model.load_weights(weights)
