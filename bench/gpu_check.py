"""One pass over searchgym's CUDA code paths on a tiny random Llama: pass or fail, time and peak
memory per part. The real models stay home: the model is `random_llama` (2 layers, 32 wide) over
SmolLM2's tokenizer, written to a temporary folder.

    python bench/gpu_check.py --device cuda     # on a GPU machine
    python bench/gpu_check.py --device cpu      # the same code on CPU (tests/bench/test_bench_gpu_check.py)

``--device cpu`` hides any GPU (``CUDA_VISIBLE_DEVICES=""``) before torch loads, so every
``torch.cuda.is_available()`` branch of the library takes its CPU side; ``--device cuda`` takes the
GPU side. The parts, each run once, its failure printed and counted while the rest go on:

- ``hf-policy``: `HFPolicy` with no device or dtype given (cuda and bfloat16 on a GPU), sampling a
  batch; generation leaves the global RNG of its device as it found it (``fork_rng``).
- ``cached-policy``: `CachedPolicy` with float32 weights and ``rollout_dtype: auto``, which
  samples from a bfloat16 copy where the device computes bfloat16 natively (``native_bf16``).
- ``eval``: ``searchgym eval --agent hf:MODEL`` on a few FictionalQA-BM25 dev tasks.
- ``train``, ``resume``: `train` with ``policy: hf``, ``bf16: auto`` (Accelerate's bfloat16
  autocast on a GPU), information gain and dynamic sampling: a warm start, the evaluations and one
  GRPO step with its checkpoint (which holds the CUDA RNG states), then ``resume`` to a second step.
- ``sft-simulator``: `train_simulator`, two steps of the warm start's `sft` on the device it picks
  (the GPU with bfloat16 autocast where there is one), and the saved model.
- ``trl-grpo`` (skipped where trl is not installed): trl's GRPOTrainer on `TrlEnv`, configured as
  agents/integrations/trl.py documents, for one step.

Peak memory is ``torch.cuda.max_memory_allocated`` over the part on a GPU, the process's peak RSS
so far on CPU. The exit status is 1 if any part failed.

On a GPU machine without internet, the packages it lacks travel as wheels (gymnasium,
farama-notifications, bm25s, PyStemmer, beautifulsoup4, soupsieve; trl, datasets, dill and
multiprocess for the trl parts; searchgym itself from ``pip wheel --no-deps .``), and SmolLM2's
tokenizer as a copy of ``$SEARCHGYM_CACHE/models/smollm2-135m-instruct-tokenizer``. Training
needs a transformers whose models take a boolean ``logits_to_keep`` mask (5.24 does, 5.17 fails
in ``target_logits`` with an IndexError).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import resource
import sys
import tempfile
import time
import traceback
from pathlib import Path

ENV_ID = "searchgym/FictionalQA-BM25-v0"
ENV_KWARGS = {"n_passages": 300, "max_obs_tokens": 64}


class Check:
    """Runs the parts and keeps one report row per part."""

    def __init__(self, device: str) -> None:
        import torch

        self.torch, self.cuda = torch, device == "cuda"
        self.rows: list[tuple[str, str, float, float, str]] = []

    def run(self, name: str, part, *args) -> None:
        """Run ``part(*args)``, which returns a note or raises; a failure is printed, not raised."""
        if self.cuda:
            self.torch.cuda.reset_peak_memory_stats()
        start = time.perf_counter()
        try:
            note, result = part(*args), "pass"
        except Skip as e:
            note, result = str(e), "skip"
        except Exception as e:  # a bench reports every part: one failure must not hide the rest
            traceback.print_exc()
            note, result = f"{type(e).__name__}: {e}".splitlines()[0][:100], "FAIL"
        seconds = time.perf_counter() - start
        print(f"[{name}] {result} in {seconds:.1f} s: {note}", flush=True)
        self.rows.append((name, result, seconds, self.peak_mib(), note))

    def peak_mib(self) -> float:
        if self.cuda:
            return self.torch.cuda.max_memory_allocated() / 2**20
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux

    def report(self) -> int:
        memory = "peak CUDA MiB" if self.cuda else "peak RSS MiB"
        print(f"\n{'part':<14} {'result':<6} {'time s':>7} {memory:>13}  notes")
        for name, result, seconds, peak, note in self.rows:
            print(f"{name:<14} {result:<6} {seconds:>7.1f} {peak:>13.1f}  {note}")
        failed = [row[0] for row in self.rows if row[1] == "FAIL"]
        passed = sum(row[1] == "pass" for row in self.rows)
        print(f"{passed} passed, {len(failed)} failed{': ' + ', '.join(failed) if failed else ''}")
        return 1 if failed else 0


class Skip(Exception):
    """A part that cannot run here (say, trl not installed)."""


def write_model(directory: Path) -> str:
    from transformers import AutoTokenizer

    from searchgym.agents.policies.models import DEFAULT_MODEL, random_llama, resolve_tokenizer

    tokenizer = AutoTokenizer.from_pretrained(resolve_tokenizer(DEFAULT_MODEL))
    random_llama(tokenizer).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return str(directory)


def prompts(policy) -> list[list[int]]:
    questions = ["Who founded the city of Varn?", "Which river runs past Osk?", "When was Tellin built?"]
    return [policy.apply_chat_template([{"role": "user", "content": q}]) for q in questions]


def device_rng(torch, device: str):
    return torch.cuda.get_rng_state() if device == "cuda" else torch.get_rng_state()


def check_hf_policy(model: str, device: str) -> str:
    import torch

    from searchgym.agents.policies.base import SamplingParams
    from searchgym.agents.policies.hf import HFPolicy

    policy = HFPolicy(model)  # no device, no dtype: the library picks them
    dtype = policy.model.dtype
    assert policy.device.type == device, f"HFPolicy chose {policy.device}, expected {device}"
    assert dtype == (torch.bfloat16 if device == "cuda" else torch.float32), f"HFPolicy chose {dtype}"
    rng = device_rng(torch, device)
    out = policy.generate(prompts(policy), SamplingParams(max_new_tokens=16, temperature=1.0))
    assert torch.equal(rng, device_rng(torch, device)), "generate moved the device's global RNG"
    assert all(c.token_ids and len(c.logprobs) == len(c.token_ids) for c in out)
    tokens = sum(len(c.token_ids) for c in out)
    return f"{policy.device} {str(dtype).removeprefix('torch.')}, {tokens} tokens sampled, RNG untouched"


def check_cached_policy(model: str, device: str) -> str:
    import torch

    from searchgym.agents.policies.base import SamplingParams
    from searchgym.agents.policies.cached import CachedPolicy, native_bf16

    policy = CachedPolicy(model, device=device, dtype="float32", rollout_dtype="auto")
    params = SamplingParams(max_new_tokens=16, temperature=1.0)
    first = policy.generate(prompts(policy), params)
    again = policy.generate([p + c.token_ids for p, c in zip(prompts(policy), first)], params)  # cache hits
    assert all(c.token_ids and all(math.isfinite(x) for x in c.logprobs) for c in first + again)
    copy = "bfloat16 copy" if native_bf16(torch.device(device)) else "float32 model (no native bf16)"
    return f"sampled from the {copy}; second call extends the cached streams"


def check_eval(model: str, work: Path) -> str:
    """``searchgym eval``'s own parser and run: `searchgym.cli` builds every subcommand's parser,
    and ``serve``'s imports fastapi, which a GPU machine may lack."""
    from searchgym.commands import eval as eval_command

    parser = argparse.ArgumentParser(prog="searchgym")
    eval_command.add_parser(parser.add_subparsers())
    argv = ["eval", "--env", ENV_ID, "-E", "n_passages=300", "--agent", f"hf:{model}", "--n", "4"]
    argv += ["--n-envs", "4", "--max-new-tokens", "16", "--out", str(work / "eval")]
    argv += ["--json", "--no-progress"]
    args = parser.parse_args(argv)
    with contextlib.redirect_stdout(io.StringIO()) as out:
        assert args.run(args) == 0
    metrics = json.loads(out.getvalue().strip().splitlines()[-1])["agents"][f"hf:{model}"]["all"]
    return f"{metrics['n']} episodes, EM {metrics['em']:.2f}, invalid {metrics['invalid_rate']:.2f}"


def train_config(model: str, run_dir: Path):
    from searchgym.agents.train.config import GRPOConfig

    return GRPOConfig(
        model=model,
        policy="hf",
        env=ENV_ID,
        env_kwargs={"hops": [1], **ENV_KWARGS},  # the oracle guide answers 1-hop tasks within 2 turns
        run_dir=str(run_dir),
        steps=1,
        tasks_per_step=2,
        group_size=2,
        max_turns=2,
        max_new_tokens=8,
        lr=1e-3,
        rewards={
            "terms": {"info_gain": 1.0}
        },  # a random model never answers right: the gain still makes rewards differ
        dynamic_sampling=True,
        max_refill_rounds=1,
        guide="oracle",  # its episodes make the random model's groups informative: a real gradient
        micro_batch_size=2,
        bf16="auto",
        warm_start_episodes=4,
        warm_start_batch_size=2,
        eval_tasks=4,
        checkpoint_every=1,
        keep_checkpoints=3,
        progress=False,
        tensorboard=False,
    )


def check_train(model: str, run_dir: Path, device: str, resume: bool = False) -> str:
    import dataclasses

    import torch

    from searchgym.agents.train.grpo import _use_bf16, train
    from searchgym.agents.train.metrics_log import read_metrics

    cfg = train_config(model, run_dir)
    if resume:
        cfg = dataclasses.replace(cfg, steps=2, resume=True)
    start, phases = time.perf_counter(), []

    def timed(when: str, metrics: dict) -> None:
        phases.append(f"{when} EM {metrics['em']:.2f} at {time.perf_counter() - start:.1f} s")

    summary = train(cfg, on_eval=timed)
    assert summary["resumed_from"] == (1 if resume else 0), summary["resumed_from"]
    step = read_metrics(run_dir)[-2]  # the last GRPO step; the last row is the evaluation after it
    assert step["step"] == cfg.steps and math.isfinite(step["loss/policy"]), step
    rng = torch.load(run_dir / "checkpoints" / f"step-{cfg.steps:06d}" / "rng.pt", weights_only=True)
    cuda_states = torch.cuda.device_count() if device == "cuda" else 0
    assert len(rng["cuda"]) == cuda_states, f"checkpoint holds {len(rng['cuda'])} CUDA RNG states"
    times = ", ".join(f"{k.split('/')[1][:-2]} {step[k]:.2f}" for k in ("time/rollout_s", "time/score_s",
                                                                         "time/update_s"))  # fmt: skip
    groups = f"{step['rollout/groups_trained']:.0f} of {step['rollout/groups_played']:.0f} groups kept"
    return (
        f"step {cfg.steps}: loss {step['loss/policy']:.4f}, reward {step['reward/total']:.3f}, {groups}, "
        f"{times} s; bf16 autocast {_use_bf16(cfg)}; {len(rng['cuda'])} CUDA RNG states in checkpoint; "
        + "; ".join(phases)
    )


def need_trl() -> None:
    import importlib.util

    if importlib.util.find_spec("trl") is None:
        raise Skip("trl is not installed")


def check_sft_simulator(model: str, work: Path, device: str) -> str:
    import unittest

    from searchgym.agents.train.sft_simulator import (
        SimulatorSFTConfig,
        simulator_examples,
        train_simulator,
        world_queries,
    )
    from searchgym.retrievers import BM25, Doc
    from searchgym.tasks.world import load_world

    world = load_world(seed=0, n_passages=300)
    bm25 = BM25.build([Doc(p["id"], p["title"], p["text"]) for p in world.passages])
    rows = simulator_examples(world_queries(world)[:4], bm25, k=2)
    cfg = SimulatorSFTConfig(
        work / "sim", model=model, steps=2, batch_size=2, max_length=256, show_progress=False
    )
    # train_simulator logs the device and precision it picked
    with unittest.TestCase().assertLogs("searchgym.agents.train.sft_simulator", "INFO") as logs:
        result = train_simulator(rows, cfg)
    picked = logs.records[0].getMessage().split(" on ")[-1]
    precision = "bfloat16 autocast" if device == "cuda" else "float32"
    assert picked.startswith(device) and picked.endswith(precision), picked
    assert len(result.losses) == 2 and all(math.isfinite(x) for x in result.losses), result.losses
    assert (result.out / "model.safetensors").is_file()
    return f"{picked}, losses {[round(x, 3) for x in result.losses]}"


def check_trl_grpo(model: str, work: Path, device: str) -> str:
    need_trl()
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer
    from trl.chat_template_utils import qwen2_5_chat_template

    from searchgym.agents.integrations.trl import TrlEnv, trl_dataset
    from searchgym.envs.registry import make

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # environment_factory is experimental in trl
    env_kwargs = {"split": "train", "hops": [2], "max_turns": 2, "protocol": "tool_calls", **ENV_KWARGS}
    with make(ENV_ID, **env_kwargs) as env:
        tasks = env.unwrapped.tasks
    tokenizer = AutoTokenizer.from_pretrained(model)
    tokenizer.chat_template = qwen2_5_chat_template  # trl parses tool calls only in templates it knows
    gpu = torch.cuda.is_available()
    args = GRPOConfig(
        output_dir=str(work / "trl"),
        use_cpu=not gpu,
        bf16=gpu,
        max_steps=1,
        per_device_train_batch_size=2,
        gradient_accumulation_steps=2,
        num_generations=2,
        max_completion_length=256,
        generation_kwargs={"max_new_tokens": 8},
        max_tool_calling_iterations=2,
        learning_rate=1e-3,
        beta=0.0,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
    )
    trainer = GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32),
        args=args,
        train_dataset=trl_dataset(ENV_ID, tasks[:8], **env_kwargs),
        processing_class=tokenizer,
        environment_factory=TrlEnv.factory(ENV_ID, **env_kwargs),
    )
    with contextlib.redirect_stdout(sys.stderr):  # trl prints its logs
        trainer.train()
    assert trainer.model.device.type == device, trainer.model.device
    log = next(h for h in trainer.state.log_history if "loss" in h)
    assert math.isfinite(log["loss"]), log
    return f"use_cpu {args.use_cpu}, bf16 {args.bf16}, loss {log['loss']:.4f}, reward {log['reward']:.3f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), required=True)
    parser.add_argument("--out", type=Path, help="keep the model, runs and logs here (default: a temp dir)")
    args = parser.parse_args(argv)
    if args.device == "cpu":
        os.environ["CUDA_VISIBLE_DEVICES"] = ""  # before torch loads: the library sees no GPU
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # everything is local; a GPU machine may be offline
    import torch
    import transformers

    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda, but torch sees no CUDA device")
    name = torch.cuda.get_device_name() if args.device == "cuda" else "CPU"
    versions = f"torch {torch.__version__}, transformers {transformers.__version__}"
    print(f"device {args.device} ({name}), {versions}", flush=True)

    with tempfile.TemporaryDirectory() as tmp:
        work = args.out or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        model = write_model(work / "tiny-llama")
        check = Check(args.device)
        check.run("hf-policy", check_hf_policy, model, args.device)
        check.run("cached-policy", check_cached_policy, model, args.device)
        check.run("eval", check_eval, model, work)
        check.run("train", check_train, model, work / "grpo", args.device)
        check.run("resume", check_train, model, work / "grpo", args.device, True)
        check.run("sft-simulator", check_sft_simulator, model, work, args.device)
        check.run("trl-grpo", check_trl_grpo, model, work, args.device)
        return check.report()


if __name__ == "__main__":
    sys.exit(main())
