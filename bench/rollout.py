"""Batched multi-turn rollout tokens/s against plain ``model.generate`` on the same prompts.

    python bench/rollout.py                                   # SmolLM2-135M, 16 envs, 3 turns
    python bench/rollout.py --model /path/to/model --batch 32 --turns 4 --max-new-tokens 64

The rollout plays ``--batch`` episodes of the generated world side by side with `PolicyAgent`
over `HFPolicy`: every turn is one batched generate call with stop strings and log-prob
recording, then every env steps (parsing, BM25, observation tokens appended). The ceiling
replays exactly the prompts of every call through plain ``model.generate`` with the same batch,
sampling settings and number of decoding steps, and nothing else. ``ratio`` is rollout tokens/s
over ceiling tokens/s (1.0 = the rollout machinery costs nothing); the goal is >= 0.8.
"""

from __future__ import annotations

import argparse
import time

import torch

import searchgym
from searchgym.agents import run_episodes
from searchgym.agents.policies.agent import PolicyAgent
from searchgym.agents.policies.base import SamplingParams
from searchgym.agents.policies.hf import HFPolicy


class Recording:
    """An HFPolicy whose generate calls are timed and whose prompts are kept for the replay."""

    def __init__(self, policy: HFPolicy) -> None:
        self.policy, self.calls, self.seconds = policy, [], 0.0

    def __getattr__(self, name):
        return getattr(self.policy, name)

    def generate(self, prompts, params):
        start = time.perf_counter()
        done = self.policy.generate(prompts, params)
        self.seconds += time.perf_counter() - start
        self.calls.append(([list(p) for p in prompts], max(len(c.token_ids) for c in done), done))
        return done


@torch.inference_mode()
def replay(policy: HFPolicy, calls, params: SamplingParams) -> float:
    """Seconds plain ``model.generate`` takes for the recorded calls, each run for as many
    decoding steps as its longest completion, on the same padded batch."""
    seconds = 0.0
    for prompts, steps, _ in calls:
        batch = policy.tokenizer.pad({"input_ids": prompts}, return_tensors="pt").to(policy.device)
        start = time.perf_counter()
        policy.model.generate(
            **batch,
            max_new_tokens=steps,
            min_new_tokens=steps,
            do_sample=params.temperature > 0,
            temperature=params.temperature or None,
            top_p=params.top_p if params.temperature > 0 else None,
            top_k=None,
            pad_token_id=policy.tokenizer.pad_token_id,
        )
        seconds += time.perf_counter() - start
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--batch", type=int, default=16, help="episodes played side by side")
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--n-passages", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    policy = Recording(HFPolicy(args.model, device="cpu"))
    # no explicit seed: that would replay the same draws at every turn (see `TokenizedPolicy.reseed`)
    params = SamplingParams(max_new_tokens=args.max_new_tokens, temperature=args.temperature)
    policy.policy.reseed(0)
    env_id, env_kwargs = "searchgym/FictionalQA-BM25-v0", {"n_passages": args.n_passages}
    tasks = searchgym.make(env_id, **env_kwargs).unwrapped.tasks[: args.batch]
    make_env = lambda: searchgym.make(env_id, max_turns=args.turns, **env_kwargs)  # noqa: E731
    make_env().close()  # the world and its index are built once per process, before timing
    warm = [policy.policy.apply_chat_template([{"role": "user", "content": t.question}]) for t in tasks]
    policy.policy.generate(warm, params)  # first-call costs (allocations, kernels) hit neither side
    replay(policy.policy, [(warm, 4, None)], params)

    start = time.perf_counter()
    episodes = run_episodes(make_env, lambda: PolicyAgent(policy, params), tasks, n_envs=args.batch)
    rollout_s = time.perf_counter() - start
    tokens = sum(len(c.token_ids) for _, _, done in policy.calls for c in done)
    steps = sum(steps * len(prompts) for prompts, steps, _ in policy.calls)
    ceiling_s = replay(policy.policy, policy.calls, params)

    turns = sum(ep.n_turns for ep in episodes)
    print(f"{args.model}: {len(episodes)} episodes, {turns} turns, {len(policy.calls)} generate calls")
    print(f"{'':>26}{'seconds':>10}{'tokens/s':>10}")
    print(f"{'rollout (all of it)':>26}{rollout_s:>10.1f}{tokens / rollout_s:>10.1f}")
    print(f"{'  of which generate':>26}{policy.seconds:>10.1f}")
    print(f"{'ceiling: model.generate':>26}{ceiling_s:>10.1f}{tokens / ceiling_s:>10.1f}")
    print(f"ratio rollout/ceiling: {ceiling_s / rollout_s:.2f}  (goal >= 0.8)")
    print(f"tokens kept {tokens} of {steps} decoded (rows stop early; the ceiling decodes them all)")


if __name__ == "__main__":
    main()
