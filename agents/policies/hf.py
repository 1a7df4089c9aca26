"""`HFPolicy`: a transformers causal LM as a batched policy, on CPU or GPU."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch

from searchgym.agents.policies.base import (
    Completion,
    SamplingParams,
    TokenizedPolicy,
    check_token_prompts,
)
from searchgym.agents.policies.models import DEFAULT_MODEL, hub_progress, model_hint, resolve_model
from searchgym.errors import DataNotFoundError
from searchgym.hub import load_locally, why_not_loaded


class _SampledLogprobs:
    """A logits processor that records, for every step, the log-probability of the token that
    was then chosen, under ``softmax(logits / temperature)``.

    Transformers runs user processors before its temperature and top-p warpers, so this one sees
    the raw logits. The token chosen at step t is only known at step t + 1 (or after `generate`
    returns), so each call scores the previous step's choice; memory is one step's log-softmax.
    """

    def __init__(self, temperature: float) -> None:
        self.temperature = temperature if temperature > 0 else 1.0
        self.steps: list[torch.Tensor] = []
        self._last: torch.Tensor | None = None

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        self.take(input_ids[:, -1])
        self._last = torch.log_softmax(scores.float() / self.temperature, dim=-1)
        return scores

    def take(self, chosen: torch.Tensor) -> None:
        if self._last is not None:
            self.steps.append(self._last.gather(1, chosen[:, None].to(self._last.device))[:, 0].cpu())
            self._last = None


class _StopStrings:
    """Stop a row once its generated text contains a stop string.

    Transformers' own ``stop_strings`` option precomputes a table over the whole vocabulary on
    every ``generate`` call (seconds for a 49k vocabulary, more than the generation itself in a
    multi-turn rollout). Decoding the last few tokens of each row is enough: every token is at
    least one character, so a stop string of n characters lies within the last n + 1 tokens.
    """

    def __init__(self, tokenizer, stop: Sequence[str], prompt_length: int) -> None:
        self.tokenizer, self.stop, self.start = tokenizer, tuple(stop), prompt_length
        self.tail = max(len(s) for s in self.stop) + 1

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor, **kwargs) -> torch.Tensor:
        new = input_ids[:, self.start :]
        texts = self.tokenizer.batch_decode(new[:, -self.tail :], skip_special_tokens=False)
        return torch.tensor([any(s in t for s in self.stop) for t in texts], device=input_ids.device)


class HFPolicy(TokenizedPolicy):
    """Generate with a transformers causal LM (``model`` is a hub id, a local directory, or the
    alias ``smollm2-135m-instruct``; see `searchgym.agents.policies.models`).

    Prompts are left-padded into one batch; each row stops on its own at the end-of-sequence
    token or after a stop string. ``dtype`` defaults to bfloat16 on a GPU that supports it and
    float32 otherwise. The model is public (``policy.model``) so a trainer can update it in place.
    """

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        device: str | None = None,
        dtype: str | torch.dtype | None = None,
        max_batch_size: int = 64,
        seed: int = 0,
        show_progress: bool = False,
    ) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.name = model
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        if dtype is None:
            bf16 = self.device.type == "cuda" and torch.cuda.is_bf16_supported()
            dtype = torch.bfloat16 if bf16 else torch.float32
        dtype = getattr(torch, dtype) if isinstance(dtype, str) else dtype
        path = resolve_model(model, show_progress=show_progress)
        if Path(path).is_dir() and not (Path(path) / "config.json").is_file():
            raise DataNotFoundError(
                f"cannot load model {model!r}: {path} holds no config.json; give a directory written by "
                "save_pretrained, a hub id, or the offline default 'smollm2-135m-instruct'"
            )
        local = load_locally(path)
        try:
            with hub_progress(show_progress):
                self.tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=local)
                self.model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, local_files_only=local)
                self.model = self.model.to(self.device).eval()
        except OSError as e:
            raise DataNotFoundError(
                f"cannot load model {model!r} ({why_not_loaded(path, e)}); {model_hint(model)}"
            ) from e
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.tokenizer.padding_side = "left"
        self.max_batch_size = max_batch_size
        self.seed = seed
        self._calls = 0

    @property
    def eos_token_ids(self) -> set[int]:
        ids = self.model.generation_config.eos_token_id
        ids = ids if isinstance(ids, list) else [ids]
        return {i for i in ids if i is not None} | {self.tokenizer.eos_token_id}

    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[Completion]:
        check_token_prompts(prompts)
        seed = self._call_seed(params)
        out: list[Completion] = []
        with torch.random.fork_rng(devices=[self.device] if self.device.type == "cuda" else []):
            torch.manual_seed(seed)
            for start in range(0, len(prompts), self.max_batch_size):
                out.extend(self._generate_batch(prompts[start : start + self.max_batch_size], params))
        return out

    @torch.inference_mode()
    def _generate_batch(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[Completion]:
        batch = self.tokenizer.pad({"input_ids": [list(p) for p in prompts]}, return_tensors="pt")
        batch = batch.to(self.device)
        recorder = _SampledLogprobs(params.temperature)
        sampling = params.temperature > 0
        output = self.model.generate(
            **batch,
            max_new_tokens=params.max_new_tokens,
            do_sample=sampling,
            temperature=params.temperature if sampling else None,
            top_p=params.top_p if sampling else None,
            top_k=None,
            stopping_criteria=[_StopStrings(self.tokenizer, params.stop, batch["input_ids"].shape[1])]
            if params.stop
            else None,
            pad_token_id=self.tokenizer.pad_token_id,
            logits_processor=[recorder],
        )
        new = output[:, batch["input_ids"].shape[1] :]
        recorder.take(new[:, -1])
        logprobs = torch.stack(recorder.steps, dim=1) if recorder.steps else torch.zeros(new.shape)
        return [self._completion(row.tolist(), lp.tolist(), params) for row, lp in zip(new, logprobs)]

    def _completion(self, ids: list[int], logprobs: list[float], params: SamplingParams) -> Completion:
        """Cut one row where it really ended: at its first end-of-sequence token (kept), or after
        a stop string. Later tokens are padding that `generate` added once the row was done."""
        eos, pad = self.eos_token_ids, self.tokenizer.pad_token_id
        end = next((i for i, t in enumerate(ids) if t in eos or t == pad), len(ids))
        text = self.tokenizer.decode(ids[:end], skip_special_tokens=False)  # the EOS token is not text
        stopped_at_string = any(s in text for s in params.stop)
        if end < len(ids) and ids[end] in eos and not stopped_at_string:
            end += 1  # the model chose to stop: its end-of-sequence token is part of the turn
        reason = "stop" if end < len(ids) or stopped_at_string or (ids and ids[-1] in eos) else "length"
        return Completion(text=text, token_ids=ids[:end], logprobs=logprobs[:end], finish_reason=reason)
