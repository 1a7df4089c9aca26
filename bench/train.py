"""Wall time per GRPO step: searchgym's trainer against trl's GRPOTrainer, same model and env.

    python bench/train.py                     # SmolLM2-135M-Instruct, 2 tasks x 4 episodes, 1 + 3 steps
    python bench/train.py --quick             # a tiny random Llama, tiny settings: a minute
    python bench/train.py --model /path/to/model --tasks-per-step 2 --group-size 8 --steps 5
    python bench/train.py --sides searchgym --profile   # cProfile one side, top functions printed
    python bench/train.py --policy cpu                  # searchgym rolls out with its CPU engine

Both sides train the same checkpoint: the model (``--model``, default the offline
smollm2-135m-instruct; ``--quick``: a random 2-layer Llama with SmolLM2's tokenizer) is saved once
to a temporary folder with trl's Qwen2.5 chat template on its tokenizer (trl parses tool calls
only through a template it knows), and each side loads those files, in fp32, on CPU, in a fresh
process (so memory and threads do not leak between them; ``peak RSS`` is that process's). Both
play searchgym/FictionalQA-BM25-v0 with the ``tool_calls`` protocol on 2-hop training questions
with the same ``top_k``, ``max_obs_tokens``, turn limit and reward weights (the env's defaults):

- searchgym: ``train(GRPOConfig(...))``, no warm start, no evaluation; one rollout of
  ``tasks_per_step x group_size`` episodes and one optimizer step per step; ``time/step_s`` and
  ``time/rollout_s`` come from RUN_DIR/metrics.jsonl.
- trl: ``GRPOTrainer(environment_factory=TrlEnv.factory(...), train_dataset=trl_dataset(...))``
  with the same episodes per step (``num_generations`` = group size), one generation batch per
  optimizer step, micro-batches of the same size (gradient accumulation over the batch), beta 0,
  one iteration, DAPO's token-mean loss (searchgym's ``token_mean``), group-scaled advantages,
  constant learning rate, activation checkpointing off (trl's default on makes its generation
  slower). A step is timed from trl's ``on_step_begin`` to ``on_step_end``; rollout is its
  ``_generate`` call (generation, tool calls, env steps).

Token budgets. searchgym writes at most ``max_new_tokens`` per turn for at most ``max_turns``
turns; observations do not count. trl caps each generation call with ``max_new_tokens`` too
(``generation_kwargs``) and runs ``max_tool_calling_iterations = max_turns`` rounds of tool calls,
as the adapter documents: an answer in the last turn is carried out, after which trl lets the
model write one closing message (so up to ``max_turns + 1`` generations an episode). trl's
``max_completion_length`` covers the whole multi-turn completion, tool results included, so it is
set where it never binds first: ``(max_turns + 1) x max_new_tokens + max_turns x (2 x
max_obs_tokens + 32)`` (a result of n word-level tokens is about 1.3 n model tokens, plus the
template's tokens around it). Episodes still differ in length: searchgym plays until an answer or
the turn limit (an action it cannot parse earns an error message and another turn), trl stops an
episode at the first reply without a tool call. ``tokens/step`` (policy tokens, observations
excluded) and ``turns/ep`` (generated replies per episode) show how much each side generated;
``s/1k tok`` divides the step time by it.

The first ``--warmup`` steps of each side are not timed; the table shows medians of the next
``--steps``. ``ratio`` is searchgym s/step over trl s/step (goal <= 0.8). Results are printed and
written to --out/train.json. Timings are wall clock on a shared machine: read the ratios. The
defaults are sized for a 2-core CPU (about 7 minutes a searchgym step there); the quickstart's
shape is ``--tasks-per-step 4 --max-turns 4 --max-new-tokens 64``. ``--max-turns 1`` gives both
sides one reply per episode, the same work, which isolates the trainers' own costs.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import dataclasses
import io
import json
import multiprocessing
import os
import pstats
import resource
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ENV_ID = "searchgym/FictionalQA-BM25-v0"
SIDES = ("searchgym", "trl")


@dataclass(frozen=True)
class Settings:
    """What both sides share."""

    tasks_per_step: int
    group_size: int
    max_turns: int
    max_new_tokens: int
    micro_batch_size: int
    top_k: int
    max_obs_tokens: int
    n_passages: int
    lr: float
    warmup: int
    steps: int
    threads: int
    seed: int
    policy: str
    progress: bool

    @property
    def episodes(self) -> int:
        return self.tasks_per_step * self.group_size

    @property
    def env_kwargs(self) -> dict[str, Any]:
        return {
            "hops": [2],
            "top_k": self.top_k,
            "max_obs_tokens": self.max_obs_tokens,
            "n_passages": self.n_passages,
            "protocol": "tool_calls",
        }

    @property
    def trl_max_completion_length(self) -> int:
        """trl's budget for a whole episode (tool results included), large enough never to end
        an episode that searchgym's per-turn and turn limits would let go on."""
        per_result = 2 * self.max_obs_tokens + 32
        return (self.max_turns + 1) * self.max_new_tokens + self.max_turns * per_result


# ---------------------------------------------------------------- the model both sides load


def prepare_model(name: str | None, directory: Path) -> str:
    """Save the model (``name``; None: a tiny random Llama) with trl's Qwen2.5 chat template on
    its tokenizer to ``directory``; returns a label for the table."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl.chat_template_utils import qwen2_5_chat_template

    from searchgym.agents.policies.models import DEFAULT_MODEL, random_llama, resolve_model, resolve_tokenizer

    if name is None:
        tokenizer = AutoTokenizer.from_pretrained(resolve_tokenizer(DEFAULT_MODEL))
        model, label = random_llama(tokenizer), "tiny random Llama"
    else:
        path = resolve_model(name, show_progress=True)
        tokenizer = AutoTokenizer.from_pretrained(path)
        model, label = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32), name
    tokenizer.chat_template = qwen2_5_chat_template  # SmolLM2's own template has no tool calling
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return label


# ---------------------------------------------------------------- the two sides


def bench_searchgym(model_dir: str, s: Settings, work_dir: Path) -> dict[str, Any]:
    from searchgym.agents.train.config import GRPOConfig
    from searchgym.agents.train.grpo import train
    from searchgym.agents.train.metrics_log import read_metrics

    steps = s.warmup + s.steps
    cfg = GRPOConfig(
        model=model_dir,
        policy=s.policy,
        env=ENV_ID,
        env_kwargs=s.env_kwargs,
        run_dir=str(work_dir / "searchgym"),
        seed=s.seed,
        steps=steps,
        tasks_per_step=s.tasks_per_step,
        group_size=s.group_size,
        max_turns=s.max_turns,
        max_new_tokens=s.max_new_tokens,
        temperature=1.0,
        lr=s.lr,
        kl_coef=0.0,
        updates_per_step=1,
        micro_batch_size=s.micro_batch_size,
        bf16=False,
        warm_start_episodes=0,
        eval_tasks=0,
        checkpoint_every=steps + 1,  # train() still saves at the start and the end, outside the step times
        keep_checkpoints=1,
        tensorboard=False,
        progress=s.progress,
    )
    train(cfg)
    rows = [r for r in read_metrics(cfg.run_dir) if "time/step_s" in r]
    return {
        "step_s": [r["time/step_s"] for r in rows],
        "rollout_s": [r["time/rollout_s"] for r in rows],
        "tokens": [r["rollout/response_tokens"] * s.episodes for r in rows],
        "turns_per_episode": [r["rollout/turns"] for r in rows],
        "reward": [r["reward/total"] for r in rows],
    }


def bench_trl(model_dir: str, s: Settings, work_dir: Path) -> dict[str, Any]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from searchgym.agents.integrations.trl import TrlEnv, trl_dataset

    class StepTimer(TrainerCallback):
        def __init__(self) -> None:
            self.start, self.step_s = 0.0, []

        def on_step_begin(self, args, state, control, **kwargs):
            self.start = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            self.step_s.append(time.perf_counter() - self.start)

    class TimedTrainer(GRPOTrainer):
        """trl's trainer, unchanged but for timing its rollouts and counting generated replies."""

        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            self.rollout_s: list[float] = []
            self.replies: list[int] = []
            self._replies = 0

        def _generate(self, prompts):
            tick, self._replies = time.perf_counter(), 0
            out = super()._generate(prompts)
            self.rollout_s.append(time.perf_counter() - tick)
            self.replies.append(self._replies)
            return out

        def _generate_single_turn(self, prompt_ids, *args, **kwargs):
            self._replies += len(prompt_ids)
            return super()._generate_single_turn(prompt_ids, *args, **kwargs)

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # environment_factory is experimental in trl
    env_kwargs = {"split": "train", "max_turns": s.max_turns, **s.env_kwargs}
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    args = GRPOConfig(
        output_dir=str(work_dir / "trl"),
        max_steps=s.warmup + s.steps,
        per_device_train_batch_size=s.micro_batch_size,
        gradient_accumulation_steps=s.episodes // s.micro_batch_size,  # one optimizer step per rollout
        num_generations=s.group_size,
        max_completion_length=s.trl_max_completion_length,
        generation_kwargs={"max_new_tokens": s.max_new_tokens},  # per generation call, as searchgym's
        max_tool_calling_iterations=s.max_turns,
        temperature=1.0,
        learning_rate=s.lr,
        lr_scheduler_type="constant",
        beta=0.0,
        num_iterations=1,
        loss_type="dapo",
        scale_rewards="group",
        activation_checkpointing=False,
        bf16=False,
        use_cpu=True,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        disable_tqdm=not s.progress,
        seed=s.seed,
    )
    timer = StepTimer()
    trainer = TimedTrainer(
        model=model,
        args=args,
        train_dataset=trl_dataset(ENV_ID, **env_kwargs),
        processing_class=tokenizer,
        environment_factory=TrlEnv.factory(ENV_ID, **env_kwargs),
        callbacks=[timer],
    )
    trainer.train()
    logs = [h for h in trainer.state.log_history if "completions/mean_length" in h]
    return {
        "step_s": timer.step_s,
        "rollout_s": trainer.rollout_s,
        "tokens": [h["completions/mean_length"] * s.episodes for h in logs],
        "turns_per_episode": [n / s.episodes for n in trainer.replies],
        "reward": [h["reward"] for h in logs],
    }


def run_side(side: str, model_dir: str, s: Settings, work_dir: Path, profile: bool) -> dict[str, Any]:
    """One side's whole run, in the calling (fresh) process; adds the peak RSS and, with
    ``profile``, the top of a cProfile by cumulative time (the full stats go to ``work_dir``)."""
    import torch

    if s.threads:
        torch.set_num_threads(s.threads)
    bench = bench_searchgym if side == "searchgym" else bench_trl
    profiler = cProfile.Profile() if profile else None
    start = time.perf_counter()
    if profiler is not None:
        profiler.enable()
    with contextlib.redirect_stdout(sys.stderr):  # trl prints its logs; stdout is for the table
        result = bench(model_dir, s, work_dir)
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(work_dir / f"{side}.prof")
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(30)
        result["profile"] = text.getvalue()
    result["wall_s"] = time.perf_counter() - start
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    result["torch_threads"] = torch.get_num_threads()
    return result


def in_fresh_process(fn, *args):
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(fn, *args).result()


# ---------------------------------------------------------------- results


def summarize(result: dict[str, Any], warmup: int, episodes: int) -> dict[str, Any]:
    """Medians over the timed steps (the first ``warmup`` dropped), and what follows from them:
    episodes a minute, and policy tokens a second in the rollout and in the rest of the step
    (scoring and the update, which reads every policy token again)."""

    def median(key: str) -> float | None:
        values = result[key][warmup:]
        return statistics.median(values) if values else None

    row = {key: median(key) for key in ("step_s", "rollout_s", "tokens", "turns_per_episode", "reward")}
    row["s_per_1k_tokens"] = 1000 * row["step_s"] / row["tokens"] if row["tokens"] else None
    row["episodes_per_min"] = 60 * episodes / row["step_s"] if row["step_s"] else None
    row["rollout_tok_s"] = ratio(row["tokens"], row["rollout_s"])
    row["update_tok_s"] = ratio(row["tokens"], row["step_s"] - row["rollout_s"]) if row["step_s"] else None
    row["peak_rss_mb"] = result["peak_rss_mb"]
    return row


COLUMNS = [
    ("side", "{}", 10), ("step_s", "{:.1f}", 8), ("rollout_s", "{:.1f}", 10), ("tokens", "{:,.0f}", 12),
    ("turns_per_episode", "{:.2f}", 9), ("s_per_1k_tokens", "{:.2f}", 9), ("episodes_per_min", "{:.1f}", 8),
    ("rollout_tok_s", "{:.1f}", 11), ("update_tok_s", "{:.1f}", 10), ("peak_rss_mb", "{:,.0f}", 12),
]  # fmt: skip
HEADERS = ["side", "s/step", "rollout s", "tokens/step", "turns/ep", "s/1k tok", "ep/min", "rollout t/s",
           "update t/s", "peak RSS MB"]  # fmt: skip


def format_table(rows: dict[str, dict[str, Any]]) -> list[str]:
    lines = ["  ".join(h.rjust(width) for h, (_, _, width) in zip(HEADERS, COLUMNS))]
    for side, row in rows.items():
        cells = [side] + [
            fmt.format(row[key]) if row.get(key) is not None else "-" for key, fmt, _ in COLUMNS[1:]
        ]
        lines.append("  ".join(cell.rjust(width) for cell, (_, _, width) in zip(cells, COLUMNS)))
    return lines


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


# ---------------------------------------------------------------- main


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="a tiny random Llama and tiny settings")
    parser.add_argument("--model", help="default smollm2-135m-instruct (--quick: a tiny random Llama)")
    parser.add_argument("--sides", nargs="+", choices=SIDES, default=list(SIDES))
    parser.add_argument("--tasks-per-step", type=int, help="default 2 (--quick: 2)")
    parser.add_argument("--group-size", type=int, help="episodes per task; default 4 (--quick: 2)")
    parser.add_argument("--max-turns", type=int, help="default 3 (--quick: 2)")
    parser.add_argument("--max-new-tokens", type=int, help="per turn; default 48 (--quick: 8)")
    parser.add_argument("--micro-batch-size", type=int, help="episodes per backward; default 4 (--quick: 2)")
    parser.add_argument("--top-k", type=int, default=2)
    parser.add_argument("--max-obs-tokens", type=int, default=256)
    parser.add_argument("--n-passages", type=int, help="generated world size; default 2,000 (--quick: 300)")
    parser.add_argument("--lr", type=float, default=1e-6)
    parser.add_argument("--warmup", type=int, default=1, help="first steps of each side, not timed")
    parser.add_argument("--steps", type=int, help="timed steps per side; default 3 (--quick: 1)")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--policy", default="hf", help="searchgym's policy backend: hf, or cpu (its CPU engine)"
    )
    parser.add_argument("--profile", action="store_true", help="cProfile each side; stats in --out")
    parser.add_argument("--out", type=Path, default=Path("runs/bench-train"))
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    defaults = dict(tasks_per_step=(2, 2), group_size=(2, 4), max_turns=(2, 3), max_new_tokens=(8, 48),
                    micro_batch_size=(2, 4), n_passages=(300, 2000), steps=(1, 3))  # fmt: skip
    for key, (quick, full) in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, quick if args.quick else full)
    if args.model is None and not args.quick:
        args.model = "smollm2-135m-instruct"
    episodes = args.tasks_per_step * args.group_size
    if episodes % args.micro_batch_size:
        parser.error(f"--micro-batch-size must divide the {episodes} episodes of a step")
    if args.group_size < 2 or args.steps < 1 or args.warmup < 0:
        parser.error("need --group-size >= 2, --steps >= 1 and --warmup >= 0")
    return args


def main(argv=None) -> dict:
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ["CUDA_VISIBLE_DEVICES"] = ""  # the comparison is on CPU; the sides' processes inherit it
    s = Settings(
        **{f.name: getattr(args, f.name) for f in dataclasses.fields(Settings) if f.name != "progress"},
        progress=not args.no_progress,
    )
    raw: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="bench-train-") as tmp:
        model_dir = Path(tmp) / "model"
        label = prepare_model(args.model, model_dir)
        for side in args.sides:
            print(f"{side}: {s.warmup} + {s.steps} GRPO steps ...", file=sys.stderr, flush=True)
            work_dir = args.out if args.profile else Path(tmp)
            raw[side] = in_fresh_process(run_side, side, str(model_dir), s, work_dir, args.profile)
    rows = {side: summarize(result, s.warmup, s.episodes) for side, result in raw.items()}
    both = all(side in rows for side in SIDES)
    results = {
        "model": label,
        "env": ENV_ID,
        "settings": dataclasses.asdict(s) | {"env_kwargs": s.env_kwargs},
        "trl_max_completion_length": s.trl_max_completion_length,
        "sides": {side: rows[side] | {"raw": raw[side]} for side in rows},
        "ratio_step": ratio(rows["searchgym"]["step_s"], rows["trl"]["step_s"]) if both else None,
        "ratio_per_token": ratio(rows["searchgym"]["s_per_1k_tokens"], rows["trl"]["s_per_1k_tokens"])
        if both
        else None,
    }

    print(f"\n== GRPO step time: {label}, {ENV_ID} (2-hop, tool_calls, top_k {s.top_k}), "
          f"{s.tasks_per_step} tasks x {s.group_size} episodes, {s.max_turns} turns x {s.max_new_tokens} "
          f"tokens, micro-batch {s.micro_batch_size}, fp32 CPU; medians of {s.steps} steps after "
          f"{s.warmup} warm-up ==")  # fmt: skip
    print("\n".join(format_table(rows)))
    if both:
        print(f"ratio searchgym/trl: {results['ratio_step']:.2f} s/step (goal <= 0.8)", end="")
        if results["ratio_per_token"] is not None:
            print(f", {results['ratio_per_token']:.2f} s per policy token", end="")
        ours, peer = rows["searchgym"], rows["trl"]
        for key, what in (("episodes_per_min", "episodes/min"), ("rollout_tok_s", "rollout tokens/s"),
                          ("update_tok_s", "update tokens/s")):  # fmt: skip
            if ours[key] is not None and peer[key]:
                print(f", {ours[key] / peer[key]:.2f}x {what}", end="")
        print()
    for side in rows:
        if "profile" in raw[side]:
            print(f"\n-- {side}: cProfile, cumulative (all of it in {args.out / side}.prof)")
            print(raw[side]["profile"])
    (args.out / "train.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"\nwritten: {args.out / 'train.json'}", file=sys.stderr)
    return results


if __name__ == "__main__":
    main()
