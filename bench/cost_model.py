"""Where the main job's time goes, against what the cores can do: each phase of a GRPO step (the
rollout, the scoring, the update) and a greedy evaluation, measured beside a roofline estimate of
the same work.

    python bench/cost_model.py                        # configs/quickstart.yaml, 1 step, 16 dev tasks
    python bench/cost_model.py --model runs/quickstart/checkpoints/step-000000 --eval-tasks 64
    python bench/cost_model.py --set trainable_layers=0 --set micro_batch_size=4 --out runs/cost
    python bench/cost_model.py --quick               # a tiny random model, tiny counts: under a minute

Each phase runs through the trainer's own functions, composed as `grpo.train` composes a step:
`play.play_step` (the rollout), `rewards.score_groups` and the engine's ``drop_caches`` (the
scoring: the information gain where the config weighs it; the reference model's log-probs, with
``kl_coef``, are computed inside the update, as in train), `update.update` (``updates_per_step``
optimizer steps with the config's trainable_layers, micro_batch_size, share_prompts) and
`evaluation.evaluate` on ``--eval-tasks`` dev questions. A forward hook on every model records
each forward as it runs: its rows, new tokens, the keys and values it attends to (a cache's
length, padding included), the logits rows it computes, its dtype (bfloat16 under autocast or in a
bfloat16 rollout copy), whether it runs under gradient and which blocks then get a backward. So
the estimates count the work actually done: a prompt start the CPU engine reuses from another row
or an earlier turn is not prefilled again, a group's prompt that the update shares is read once,
finished rows that still hold a decode slot are decoded, padding is computed.

The estimates, per forward (a model of L blocks, each of W matmul weights; V x d output head):
FLOPs = 2·W·L·tokens + attention 4·rows·heads·head_dim·(new·past + new·(new+1)/2) per block +
2·V·d per logits row; bytes = the weights once (fp32 weights cast under autocast: 8 bytes each) +
each row's cached keys and values read and the new ones written + each block op's input and output
once + the logits (written, then read in float32) + the reused keys and values copied into a
prefill's or a probe's buffer. A backward, for the blocks on the gradient path (those that train
and those above them): input gradients 2·W·tokens (the q, k, v projections of a block whose input
needs none skip theirs), twice the attention, weight gradients 2·W·tokens where the block trains,
the weights read again, activations read twice, the float32 gradient read and written; the head's
input gradient over the logits rows the loss used (and its weight gradient where it trains).
Blocks below the trainable ones run forward only: 2·W·tokens. So a trained block costs 6·W·tokens.
AdamW: 16 FLOPs and 40 bytes per trainable parameter (param, grad, two moments; the clip). A
forward's time estimate is max(FLOPs / peak FLOP/s of its dtype, bytes / peak bytes/s); a phase's
roofline is the sum over its forwards, so it is at least the larger of its FLOP and bytes columns.

The peaks are measured in the same process, before and after the phases (the best of both): a GEMM
microbenchmark over the model's projection shapes at 256 rows in float32 (and bfloat16 where the
CPU computes it natively or a phase uses it; int8 rollouts are held to float32's peak), and a
large tensor copy and sum for memory bandwidth. Printed: the CPU, torch's threads, the peaks, then
per phase the measured seconds, the seconds inside the model's forwards (the rest is the env,
sampling, Python and the update's backward), the FLOP, bytes and roofline estimates in seconds,
measured / roofline, and the counts (tokens offered and prefilled, generated, decode steps and their mean and
largest batch, update tokens and policy tokens); indented rows split a phase's estimate (prefill
and decode; forward, backward and AdamW). ``--out DIR`` writes cost_model.json: the rows, the
peaks and, per phase, each episode's prompt and generated tokens.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import platform
import subprocess
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from unittest import mock

import torch
from accelerate import Accelerator
from tqdm.auto import tqdm

from searchgym.agents.policies.cached import bf16_supported
from searchgym.agents.train import evaluation, play
from searchgym.agents.train.config import load_config
from searchgym.agents.train.engine import load_policies, sync_rollout_weights
from searchgym.agents.train.freeze import decoder_blocks, freeze_all_but, top_modules
from searchgym.agents.train.grpo import _reference_model, _use_bf16, training_rubric
from searchgym.agents.train.rewards import Scorer, score_groups
from searchgym.agents.train.schedule import first_round_size, make_env, split_warm_start
from searchgym.agents.train.update import update
from searchgym.envs.contract import check_trainable_env

PHASES = ("rollout", "scoring", "update", "eval")
QKV = ("q_proj", "k_proj", "v_proj", "qkv_proj")


@dataclasses.dataclass(frozen=True)
class Shape:
    """What the cost formulas read of a causal LM: per block its matmul weights (of which q, k,
    v's) and their stored bytes, the output head, the widths, and the dtype its matmuls run in."""

    blocks: tuple[int, ...]
    qkv: tuple[int, ...]
    block_bytes: tuple[int, ...]
    head: int
    head_bytes: int
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    compute: str


def _linears(module: torch.nn.Module) -> tuple[int, int]:
    """(weights, stored bytes) of the linear layers in ``module``, int8 ones included."""
    count = nbytes = 0
    for m in module.modules():
        weight = getattr(m, "weight", None)
        weight = weight() if callable(weight) else weight if isinstance(m, torch.nn.Linear) else None
        if weight is not None:
            count, nbytes = count + weight.numel(), nbytes + weight.numel() * weight.element_size()
    return count, nbytes


def model_shape(model: torch.nn.Module) -> Shape:
    c = model.config
    _, blocks = decoder_blocks(model)
    per_block = [_linears(b) for b in blocks]
    qkv = [sum(_linears(m)[0] for n, m in b.named_modules() if n.rsplit(".", 1)[-1] in QKV) for b in blocks]
    head = model.get_output_embeddings().weight
    quantized = any(w and b <= w for w, b in per_block)  # a byte a weight or less: int8
    heads = c.num_attention_heads
    return Shape(
        blocks=tuple(w for w, _ in per_block),
        qkv=tuple(qkv),
        block_bytes=tuple(b for _, b in per_block),
        head=head.numel(),
        head_bytes=head.numel() * head.element_size(),
        hidden=c.hidden_size,
        intermediate=c.intermediate_size,
        heads=heads,
        kv_heads=getattr(c, "num_key_value_heads", None) or heads,
        head_dim=getattr(c, "head_dim", None) or c.hidden_size // heads,
        vocab=c.vocab_size,
        compute="int8" if quantized else str(head.dtype).removeprefix("torch."),
    )


@dataclasses.dataclass(frozen=True)
class Grads:
    """Which parts of a model a backward reaches: per block whether it is on the gradient path,
    whether its weights train, whether its input needs a gradient; and the head's weight."""

    on_path: tuple[bool, ...]
    trains: tuple[bool, ...]
    input_grad: tuple[bool, ...]
    head_trains: bool


def grad_structure(model: torch.nn.Module) -> Grads:
    _, blocks = decoder_blocks(model)
    trains = [any(p.requires_grad for p in b.parameters()) for b in blocks]
    below = model.get_input_embeddings().weight.requires_grad
    inputs = []
    for t in trains:
        inputs.append(below)
        below = below or t
    return Grads(
        on_path=tuple(i or t for i, t in zip(inputs, trains)),
        trains=tuple(trains),
        input_grad=tuple(inputs),
        head_trains=model.get_output_embeddings().weight.requires_grad,
    )


@dataclasses.dataclass
class Forward:
    """One forward as it ran: ``rows`` x ``new`` tokens behind ``past`` cached positions,
    ``logits`` rows of the head computed; ``grads`` where a backward follows it."""

    phase: str
    kind: str
    shape: Shape
    rows: int
    new: int
    past: int
    logits: int
    dtype: str
    autocast: bool
    grads: Grads | None = None
    head_grad: bool = False  # the loss used its logits: the head gets a backward
    seconds: float = 0.0  # spent in the forward itself


def _attention(s: Shape, rows: int, new: int, past: int) -> float:
    """FLOPs of one block's attention scores and weighted values, the causal part only."""
    return 4 * rows * s.heads * s.head_dim * (new * past + new * (new + 1) / 2)


def _per_token(s: Shape) -> tuple[int, int]:
    """(activation elements each block op reads or writes, key and value elements) per token and block."""
    q, kv = s.heads * s.head_dim, s.kv_heads * s.head_dim
    return 17 * s.hidden + 6 * q + 4 * kv + 6 * s.intermediate, 2 * kv


def forward_cost(f: Forward) -> tuple[float, float]:
    """(FLOPs, bytes) of the forward ``f`` (the module docstring gives the terms)."""
    s, tokens, a = f.shape, f.rows * f.new, 2 if f.dtype == "bfloat16" else 4
    act, kv = _per_token(s)
    n_blocks, weights = len(s.blocks), sum(s.blocks) + (s.head if f.logits else 0)
    flops = (
        2 * sum(s.blocks) * tokens + n_blocks * _attention(s, f.rows, f.new, f.past) + 2 * s.head * f.logits
    )
    nbytes = sum(s.block_bytes) + (s.head_bytes if f.logits else 0) + (4 * weights if f.autocast else 0)
    nbytes += n_blocks * f.rows * kv * (f.past + 2 * f.new) * a + n_blocks * tokens * act * a
    nbytes += f.logits * s.vocab * (a + 4) + tokens * s.hidden * a
    if f.kind == "prefill" or f.phase == "scoring":  # reused keys and values copied into a buffer
        nbytes += 2 * n_blocks * f.rows * f.past * kv * a
    return flops, nbytes


def backward_cost(f: Forward) -> tuple[float, float]:
    """(FLOPs, bytes) of the backward through the forward ``f`` (zero without one)."""
    if f.grads is None:
        return 0.0, 0.0
    s, g, tokens, a = f.shape, f.grads, f.rows * f.new, 2 if f.dtype == "bfloat16" else 4
    act, kv = _per_token(s)
    flops = nbytes = 0.0
    for i, weights in enumerate(s.blocks):
        if not g.on_path[i]:
            continue
        inputs = weights - (0 if g.input_grad[i] else s.qkv[i])
        flops += 2 * inputs * tokens + 2 * _attention(s, f.rows, f.new, f.past)
        nbytes += 2 * weights if f.autocast else s.block_bytes[i]  # autocast kept its bfloat16 copy
        nbytes += 2 * tokens * act * a + 2 * f.rows * (f.past + f.new) * kv * a
        if g.trains[i]:
            flops, nbytes = flops + 2 * weights * tokens, nbytes + 8 * weights
    if f.head_grad:
        flops += 2 * s.head * f.logits * (2 if g.head_trains else 1)
        nbytes += (
            (2 * s.head if f.autocast else s.head_bytes)
            + 8 * f.logits * s.vocab
            + (8 * s.head if g.head_trains else 0)
        )
    return flops, nbytes


def adamw_cost(trainable: int) -> tuple[float, float]:
    """(FLOPs, bytes) of AdamW's step and the gradient clip over ``trainable`` float32 parameters."""
    return 16.0 * trainable, 40.0 * trainable


class Recorder:
    """Forward hooks that record every forward of a watched model under the current phase, and
    what the rollout engine was asked to generate."""

    def __init__(self) -> None:
        self.phase: str | None = None
        self.forwards: list[Forward] = []
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        self.episodes: dict[str, list[dict[str, int]]] = defaultdict(list)
        self.optimizer_steps: list[int] = []  # trainable parameters of each step
        self._shapes: dict[int, Shape] = {}
        self._started = 0.0

        def start(module, args):  # functions, not methods: copies of the model share them
            self._started = time.perf_counter()

        def hook(module, args, kwargs, output):
            self.record(module, args, kwargs, output, time.perf_counter() - self._started)

        self.start, self.hook = start, hook

    def watch(self, model: torch.nn.Module | None) -> None:
        """Record ``model``'s forwards (copies made of it later inherit the hooks)."""
        if model is not None and self.hook not in model._forward_hooks.values():
            model.register_forward_pre_hook(self.start)
            model.register_forward_hook(self.hook, with_kwargs=True)

    @contextlib.contextmanager
    def timing(self, phase: str):
        self.phase, tick = phase, time.perf_counter()
        try:
            yield
        finally:
            self.seconds[phase] += time.perf_counter() - tick
            self.phase = None

    def record(self, module, args, kwargs, output, seconds: float) -> None:
        if self.phase is None:
            return
        ids = kwargs.get("input_ids", args[0] if args else None)
        rows, new = (ids if ids is not None else kwargs["inputs_embeds"]).shape[:2]
        cache = kwargs.get("cache", kwargs.get("past_key_values"))
        past = cache.get_seq_length() - new if cache is not None else 0
        logits = output.logits
        if id(module) not in self._shapes:
            self._shapes[id(module)] = model_shape(module)
        shape = self._shapes[id(module)]
        device = next(module.parameters()).device.type
        autocast = torch.is_autocast_enabled(device) and torch.get_autocast_dtype(device) == torch.bfloat16
        if self.phase in ("rollout", "eval"):
            # a decoding step passes positions (HF's generate, the CPU engine); the CPU engine's
            # prefill of a prompt it reuses all but the last token of passes none
            stepping = "position_ids" in kwargs or "attention_mask" in kwargs
            kind = "decode" if new == 1 and past and stepping else "prefill"
        else:
            kind = "forward"
        grads = grad_structure(module) if self.phase == "update" and torch.is_grad_enabled() else None
        dtype = "bfloat16" if autocast else shape.compute
        kept = logits.numel() // logits.shape[-1]
        cast = autocast and shape.compute != "bfloat16"  # float32 weights cast on the way in
        f = Forward(self.phase, kind, shape, rows, new, past, kept, dtype, cast, grads, seconds=seconds)
        self.forwards.append(f)
        if logits.requires_grad:
            logits.register_hook(lambda grad: setattr(f, "head_grad", True))

    def wrap_engine(self, engine: Any) -> None:
        """Count the prompt tokens the engine is given and the tokens it generates, per phase."""
        generate = engine.generate

        def counted(prompts, params):
            completions = generate(prompts, params)
            calls = self.calls[self.phase or "other"]
            calls["calls"] += 1
            calls["prompt_tokens"] += sum(map(len, prompts))
            calls["generated"] += sum(len(c.token_ids) for c in completions)
            return completions

        engine.generate = counted

    def keep_episodes(self, phase: str, episodes) -> None:
        for ep in episodes:
            t = ep.trajectory
            self.episodes[phase].append({
                "prompt_tokens": sum(len(t.prompt_ids) + s for s in t.turn_starts),
                "generated_tokens": sum(e - s for s, e in zip(t.turn_starts, t.turn_ends)),
                "turns": len(t.turn_starts),
            })  # fmt: skip


def gemm_peak(s: Shape, dtype: torch.dtype, seconds: float) -> float:
    """Achievable FLOP/s: the best single matmul over the model's projection shapes at 256 rows."""
    q, kv = s.heads * s.head_dim, s.kv_heads * s.head_dim
    best = 0.0
    for m, k, n in sorted({(256, s.hidden, q), (256, s.hidden, kv), (256, s.hidden, s.intermediate),
                           (256, s.intermediate, s.hidden), (256, s.hidden, s.vocab)}):  # fmt: skip
        a, b = torch.randn(m, k, dtype=dtype), torch.randn(k, n, dtype=dtype)
        out = torch.matmul(a, b)
        fastest, start = math.inf, time.perf_counter()
        while time.perf_counter() - start < seconds or fastest == math.inf:
            tick = time.perf_counter()
            torch.matmul(a, b, out=out)
            fastest = min(fastest, time.perf_counter() - tick)
        best = max(best, 2 * m * k * n / fastest)
    return best


def bandwidth_peak(nbytes: int, repeats: int) -> dict[str, float]:
    """Achievable bytes/s of a large copy (read and written) and of a sum (read), best of ``repeats``."""
    src = torch.ones(nbytes // 4)
    dst = torch.zeros_like(src)  # its pages touched before the first timed copy
    rates = {"copy": 0.0, "sum": 0.0}
    for _ in range(repeats):
        for name, work, moved in (("copy", lambda: dst.copy_(src), 2 * nbytes), ("sum", src.sum, nbytes)):
            tick = time.perf_counter()
            work()
            rates[name] = max(rates[name], moved / (time.perf_counter() - tick))
    return rates


def measure_peaks(s: Shape, dtypes: set[str], quick: bool) -> dict[str, float]:
    peaks = {f"{d}_flops": gemm_peak(s, getattr(torch, d), 0.05 if quick else 0.5) for d in sorted(dtypes)}
    rates = bandwidth_peak((64 if quick else 512) << 20, 3 if quick else 8)
    return peaks | {f"{k}_bytes": v for k, v in rates.items()} | {"bytes": max(rates.values())}


def estimate(items: list[tuple[float, float, str]], peaks: dict[str, float]) -> dict[str, float]:
    """FLOPs, bytes and seconds of ``(flops, bytes, dtype)`` items; roofline sums each one's max."""

    def flop_s(flops: float, dtype: str) -> float:
        return flops / peaks["bfloat16_flops" if dtype == "bfloat16" else "float32_flops"]

    return {
        "flops": sum(f for f, _, _ in items),
        "bytes": sum(b for _, b, _ in items),
        "flops_s": sum(flop_s(f, d) for f, _, d in items),
        "bytes_s": sum(b for _, b, _ in items) / peaks["bytes"],
        "roofline_s": sum(max(flop_s(f, d), b / peaks["bytes"]) for f, b, d in items),
    }


def phase_rows(rec: Recorder, peaks: dict[str, float]) -> list[dict[str, Any]]:
    """The table's rows: per phase its measured seconds, estimates and counts, and its parts'
    estimates (prefill and decode; forward, backward and AdamW)."""
    rows = []
    for phase in (p for p in PHASES if p in rec.seconds):
        forwards = [f for f in rec.forwards if f.phase == phase]
        parts: dict[str, list] = defaultdict(list)
        for f in forwards:
            parts[f.kind].append((*forward_cost(f), f.dtype))
            if f.grads is not None:
                parts["backward"].append((*backward_cost(f), f.dtype))
        if phase == "update":
            parts["adamw"] = [(*adamw_cost(n), "float32") for n in rec.optimizer_steps]
        whole = estimate([item for items in parts.values() for item in items], peaks)
        measured = rec.seconds[phase]
        rows.append({
            "phase": phase,
            "measured_s": measured,
            "forward_s": sum(f.seconds for f in forwards),
            **whole,
            "ratio": measured / whole["roofline_s"] if whole["roofline_s"] else None,  # no model work
            "counts": counts(phase, forwards, rec),
            "parts": {kind: estimate(items, peaks) for kind, items in parts.items()},
        })  # fmt: skip
    return rows


def counts(phase: str, forwards: list[Forward], rec: Recorder) -> dict[str, float]:
    """A phase's main counts: episodes and tokens; for the rollout and the evaluation the prompt
    tokens the engine was given, those it prefilled and the decode steps' batches."""
    out: dict[str, float] = {"episodes": len(rec.episodes[phase]), **rec.calls[phase]}
    tokens = sum(f.rows * f.new for f in forwards)
    if phase in ("rollout", "eval"):
        decode = [f.rows for f in forwards if f.kind == "decode"]
        out["prefilled"] = tokens - sum(decode)
        out |= {"decode_steps": len(decode), "batch": sum(decode) / max(len(decode), 1)}
        out["max_batch"] = max(decode, default=0)
    elif phase == "scoring":
        out |= {
            "forwards": len(forwards),
            "tokens": tokens,
            "kv_read": sum(f.rows * f.past for f in forwards),
        }
    else:
        out |= {"forwards": len(forwards), "tokens": tokens, "optimizer_steps": len(rec.optimizer_steps)}
        out["trainable"] = max(rec.optimizer_steps, default=0)
    return out


COUNTS = {  # what the table shows of each phase's counts
    "rollout": ("episodes", "prompt_tokens", "prefilled", "generated", "decode_steps", "batch", "max_batch"),
    "scoring": ("episodes", "forwards", "tokens", "kv_read"),
    "update": ("samples", "forwards", "tokens", "policy_tokens", "trainable"),
    "eval": ("episodes", "prompt_tokens", "prefilled", "generated", "decode_steps", "batch", "max_batch"),
}


def print_table(rows: list[dict[str, Any]]) -> None:
    titles = ("measured s", "forward s", "FLOP s", "bytes s", "roofline s")
    print(f"{'phase':<10}" + "".join(f"{title:>11}" for title in titles) + f"{'ratio':>8}  counts")

    def seconds(d: dict[str, float], keys=("flops_s", "bytes_s", "roofline_s")) -> str:
        return "".join(f"{d[k]:>11.3f}" for k in keys)

    for row in rows:
        shown = " ".join(
            f"{k}={_number(row['counts'][k])}" for k in COUNTS[row["phase"]] if k in row["counts"]
        )
        measured = seconds(row, ("measured_s", "forward_s", "flops_s", "bytes_s", "roofline_s"))
        print(f"{row['phase']:<10}{measured}{_number(row['ratio']):>8}  {shown}")
        for kind, part in row["parts"].items():
            print(f"  {kind:<8}{'':>22}{seconds(part)}")


def _number(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.1f}" if isinstance(value, float) and not value.is_integer() else f"{int(value)}"


def cpu_name() -> tuple[str, bool]:
    """lscpu's model name and whether the CPU has AVX512-BF16."""
    try:
        lines = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        lines = []
    fields = dict(line.split(":", 1) for line in lines if ":" in line)
    name = fields.get("Model name", platform.processor() or "unknown").strip()
    return name, "avx512_bf16" in fields.get("Flags", "").split()


def tiny_model(directory: Path) -> str:
    """A random 2-layer, 32-wide Llama with SmolLM2's tokenizer and chat template (`--quick`)."""
    from transformers import AutoTokenizer

    from searchgym.agents.policies.models import random_llama, resolve_tokenizer

    tokenizer = AutoTokenizer.from_pretrained(resolve_tokenizer("smollm2-135m-instruct"))
    random_llama(tokenizer).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return str(directory)


def quick_overrides(path: str, sets: list[str]) -> list[str]:
    """One task's group of 2 short episodes of at most 2 turns on a small generated world, the
    top block trained."""
    env_kwargs = load_config(path, sets).env_kwargs | {"n_passages": 300}
    small = "tasks_per_step=1 group_size=2 max_turns=2 max_new_tokens=8 trainable_layers=1"
    return [*small.split(), "dynamic_sampling=false", "oversample=1", f"env_kwargs={json.dumps(env_kwargs)}"]


def setup(cfg: Any, rec: Recorder) -> SimpleNamespace:
    """What `grpo.train` sets up before its first step (no warm start, no checkpoint), its models
    watched by ``rec``."""
    accelerator = Accelerator(
        cpu=not torch.cuda.is_available(), mixed_precision="bf16" if _use_bf16(cfg) else "no"
    )
    policy, engine = load_policies(cfg, accelerator.device)
    model = policy.model
    trainable = top_modules(model, cfg.trainable_layers) if cfg.trainable_layers else None
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    envs = [
        make_env(cfg, cfg.train_split) for _ in range(first_round_size(cfg, accelerator) * cfg.group_size)
    ]
    _, train_tasks = split_warm_start(list(check_trainable_env(envs[0])), cfg)
    if trainable:
        freeze_all_but(model, trainable)
    wrapped, optimizer = accelerator.prepare(model, optimizer)
    ref_model = _reference_model(model, Path(cfg.run_dir), 0) if cfg.kl_coef > 0 else None
    for m in (model, ref_model, getattr(engine, "_copy", None)):  # the engine's bfloat16 copy, if any
        rec.watch(m)  # an int8 copy, made from the model, inherits the hook
    rec.wrap_engine(engine)
    return SimpleNamespace(
        accelerator=accelerator,
        policy=policy,
        engine=engine,
        model=model,
        wrapped=wrapped,
        ref_model=ref_model,
        optimizer=optimizer,
        envs=envs,
        train_tasks=train_tasks,
        rubric=training_rubric(envs[0], cfg),
        protocol=envs[0].unwrapped.protocol,
    )


def play_phases(cfg: Any, job: SimpleNamespace, steps: int, rec: Recorder, bar: Any) -> None:
    """``steps`` GRPO steps, each phase as `grpo.train` runs it, then the evaluation, each timed
    and recorded by ``rec`` with the episodes it played."""
    engine, model, tokenizer = job.engine, job.model, job.policy.tokenizer
    played_groups, evaluated = play.play_groups, evaluation.run_episodes

    def kept_groups(*args, **kwargs):
        groups = played_groups(*args, **kwargs)
        rec.keep_episodes("rollout", [ep for group in groups for ep in group])
        return groups

    def kept_episodes(*args, **kwargs):
        episodes = evaluated(*args, **kwargs)
        rec.keep_episodes("eval", episodes)
        return episodes

    for step in range(steps):
        bar.set_postfix_str(f"step {step}: rollout")
        with rec.timing("rollout"), mock.patch.object(play, "play_groups", kept_groups):
            groups, _ = play.play_step(
                engine, job.envs, job.train_tasks, step, cfg, job.accelerator, bar.set_postfix_str
            )
        bar.update()
        bar.set_postfix_str(f"step {step}: scoring")
        trained = [ep for group in groups for ep in group]
        with rec.timing("scoring"):
            samples, _ = score_groups(
                groups, job.rubric, cfg, Scorer(model, tokenizer, job.protocol, engine.cached_kv)
            )
            engine.drop_caches()
        rec.keep_episodes("scoring", trained)
        bar.update()
        bar.set_postfix_str(f"step {step}: update")
        flat = [s for group in samples for s in group]
        for _ in range(cfg.updates_per_step):
            with rec.timing("update"):
                update(job.wrapped, job.ref_model, job.optimizer, samples, cfg, job.accelerator,
                       tokenizer.pad_token_id)  # fmt: skip
            rec.optimizer_steps.append(sum(p.numel() for p in model.parameters() if p.requires_grad))
            rec.calls["update"]["samples"] += len(flat)
            rec.calls["update"]["policy_tokens"] += sum(sum(s.mask) for s in flat)
        rec.keep_episodes("update", trained)
        sync_rollout_weights(job.policy, engine)
        bar.update()
    if cfg.eval_tasks:
        bar.set_postfix_str("eval")
        with rec.timing("eval"), mock.patch.object(evaluation, "run_episodes", kept_episodes):
            evaluation.evaluate(cfg, engine, job.accelerator)
        bar.update()
    for env in job.envs:
        env.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="configs/quickstart.yaml")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a config override")
    parser.add_argument("--model", help="alias, directory or checkpoint in place of the config's")
    parser.add_argument("--steps", type=int, default=1, help="GRPO steps (rollout, scoring, update)")
    parser.add_argument("--eval-tasks", type=int, help="dev questions (default 16; --quick 2; 0: none)")
    parser.add_argument("--quick", action="store_true", help="a tiny random model and tiny counts")
    parser.add_argument("--out", type=Path, help="write cost_model.json with the rows here")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        model = args.model or (tiny_model(Path(tmp)) if args.quick else None)
        sets = [*([f"model={model}"] if model else []), *args.set]
        sets = [*(quick_overrides(args.config, sets) if args.quick else []), *sets]
        eval_tasks = args.eval_tasks if args.eval_tasks is not None else 2 if args.quick else 16
        sets += [f"eval_tasks={eval_tasks}", f"progress={not args.no_progress}", f"run_dir={tmp}/run"]
        cfg = load_config(args.config, sets)
        if cfg.program:
            parser.error(f"an agent program's episodes are not measured here; unset program ({cfg.program})")
        rec = Recorder()
        job = setup(cfg, rec)
        shape = model_shape(job.model)
        native = bf16_supported()
        dtypes = {"float32"} | ({"bfloat16"} if native else set())
        before = measure_peaks(shape, dtypes, args.quick)  # also warms up the matmul kernels
        phases = 3 * args.steps + bool(eval_tasks)
        with tqdm(total=phases, desc="cost model", disable=args.no_progress) as bar:
            play_phases(cfg, job, args.steps, rec, bar)
        dtypes |= {f.dtype for f in rec.forwards} - {"int8"}
        after = measure_peaks(shape, dtypes, args.quick)
    peaks = {k: max(before.get(k, 0.0), after[k]) for k in after}
    rows = phase_rows(rec, peaks)
    name, avx512_bf16 = cpu_name()
    yes = {True: "yes", False: "no"}
    print(f"CPU: {name}, avx512_bf16: {yes[avx512_bf16]} (native bfloat16 matmuls: {yes[native]}); "
          f"torch {torch.__version__}, {torch.get_num_threads()} threads")  # fmt: skip
    gemm = ", ".join(f"{k[:-6]} GEMM {v / 1e9:.1f} GFLOP/s" for k, v in peaks.items() if k.endswith("_flops"))
    print(f"achievable (best before and after the phases): {gemm}; memory {peaks['bytes'] / 1e9:.1f} GB/s "
          f"(copy {peaks['copy_bytes'] / 1e9:.1f}, sum {peaks['sum_bytes'] / 1e9:.1f})")  # fmt: skip
    print(f"{args.config}, model {cfg.model}: {args.steps} step(s) of {cfg.tasks_per_step} tasks x "
          f"{cfg.group_size} episodes, max_new_tokens {cfg.max_new_tokens}, trainable_layers "
          f"{cfg.trainable_layers}, micro_batch_size {cfg.micro_batch_size}, share_prompts "
          f"{cfg.share_prompts}, trainer terms {cfg.trainer_terms}; eval {eval_tasks} tasks\n")  # fmt: skip
    print_table(rows)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        result = {
            "cpu": name,
            "avx512_bf16": avx512_bf16,
            "threads": torch.get_num_threads(),
            "peaks": peaks,
            "peaks_before": before,
            "peaks_after": after,
            "config": args.config,
            "overrides": sets,
            "rows": rows,
            "episodes": rec.episodes,
        }
        (args.out / "cost_model.json").write_text(json.dumps(result, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
