"""What a GRPO update costs when it trains only the top decoder blocks (``trainable_layers``), and
when it reads a group's shared prompt once (``share_prompts``): seconds per update and the
activations kept for backward, against training every parameter.

    python bench/update_cost.py --model smollm2-135m-instruct --layers 0,15,8,4
    python bench/update_cost.py --layers 15 --share both --micro-batch-size 1

Each arm runs `update.update` (the trainer's own step: micro-batches, clipped loss, AdamW) on the
same batch of synthetic episodes shaped as the main job's (``--episodes`` of ``--tokens`` tokens,
``--prompt`` of them before the first turn, the same for each ``--group-size`` episodes in a row,
``--policy-tokens`` of them the policy's, in ``--turns`` replies), from the same weights. Each
``--layers`` value is an arm with the prompts shared (``--share on``, the trainer's default),
read with every episode (``off``), or both. Arms alternate update by update, so that load from
other processes hits them alike; the first round is a warm-up and is not timed. Printed per arm:
trainable parameters, seconds per update, its ratio to the first arm, and the bytes autograd
saved for backward in one micro-batch read whole (the activations an update holds).
"""

from __future__ import annotations

import argparse
import copy
import time

import torch
from transformers import AutoModelForCausalLM

from searchgym.agents.policies.models import resolve_model
from searchgym.agents.train.config import GRPOConfig
from searchgym.agents.train.freeze import freeze_all_but, top_modules
from searchgym.agents.train.loss import Sample, collate, token_logprobs
from searchgym.agents.train.update import update


def synthetic_episodes(args, vocab: int, generator: torch.Generator) -> list[Sample]:
    """Episodes of random tokens whose policy replies are spread evenly after the prompt."""
    samples = []
    reply = args.policy_tokens // args.turns
    gap = (args.tokens - args.prompt - args.policy_tokens) // args.turns  # the observation after each reply
    for i in range(args.episodes):
        if i % args.group_size == 0:
            prompt = torch.randint(0, vocab, (args.prompt,), generator=generator).tolist()
        ids = prompt + torch.randint(0, vocab, (args.tokens - args.prompt,), generator=generator).tolist()
        mask = ([1] * reply + [0] * gap) * args.turns
        mask += [0] * (args.tokens - args.prompt - len(mask))
        logprobs = [-1.0 if m else 0.0 for m in mask]
        advantages = [float(torch.randn((), generator=generator)) if m else 0.0 for m in mask]
        samples.append(Sample(ids, args.prompt, mask, logprobs, advantages))
    return samples


def saved_bytes(model, samples, cfg, pad_id: int) -> int:
    """Bytes autograd saves for backward in one micro-batch's forward, each storage once and the
    weights (which backward reads but nothing allocates) left out."""
    batch = collate(samples[: cfg.micro_batch_size], pad_id)
    weights = {p.untyped_storage().data_ptr() for p in model.parameters()}
    storages: dict[int, int] = {}

    def pack(tensor):
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in weights:
            storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        logp, _ = token_logprobs(model, batch["input_ids"], batch["attention_mask"], batch["mask"])
    del logp
    return sum(storages.values())


def main() -> None:
    from accelerate import Accelerator

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2-135m-instruct", help="alias, directory or checkpoint")
    parser.add_argument("--layers", default="0,15,8,4", help="trainable_layers per arm (0: all)")
    parser.add_argument("--episodes", type=int, default=16)
    parser.add_argument("--tokens", type=int, default=650)
    parser.add_argument("--prompt", type=int, default=160)
    parser.add_argument("--policy-tokens", type=int, default=96)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--group-size", type=int, default=4, help="episodes in a row that share a prompt")
    parser.add_argument("--share", choices=("on", "off", "both"), default="on", help="share_prompts per arm")
    parser.add_argument("--micro-batch-size", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3, help="timed updates per arm, after a warm-up")
    args = parser.parse_args()
    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(resolve_model(args.model), dtype=torch.float32)
    pad_id = base.config.pad_token_id or 0
    samples = synthetic_episodes(args, base.config.vocab_size, torch.Generator().manual_seed(0))
    accelerator = Accelerator(cpu=True)
    shares = {"on": (True,), "off": (False,), "both": (False, True)}[args.share]
    arms = {}
    for n in (int(v) for v in args.layers.split(",")):
        for share in shares:
            model = copy.deepcopy(base)
            trainable = freeze_all_but(model, top_modules(model, n)) if n else base.num_parameters()
            cfg = GRPOConfig(
                micro_batch_size=args.micro_batch_size, lr=1e-6, max_turns=args.turns, share_prompts=share
            )
            optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=cfg.lr)
            label = (str(n) if n else "all") + (":shared" if share and len(shares) > 1 else "")
            arms[label] = dict(model=model, optimizer=optimizer, trainable=trainable, cfg=cfg, seconds=[])
    for round_ in range(args.rounds + 1):
        for arm in arms.values():
            tick = time.perf_counter()
            update(
                arm["model"],
                None,
                arm["optimizer"],
                [samples],
                arm["cfg"],
                accelerator,
                pad_id,
            )
            if round_:  # the first round warms up the allocator and the kernels
                arm["seconds"].append(time.perf_counter() - tick)
    first = None
    print(
        f"{args.episodes} episodes of {args.tokens} tokens ({args.policy_tokens} the policy's), "
        f"prompts of {args.prompt} shared by {args.group_size}, micro-batch {args.micro_batch_size}, float32"
    )
    header = ("trainable_layers", "parameters", "s/update", "ratio", "saved for backward")
    print(" ".join(f"{h:>{w}}" for h, w in zip(header, (16, 12, 9, 6, 19))))
    for label, arm in arms.items():
        seconds = sum(arm["seconds"]) / len(arm["seconds"])
        first = first or seconds
        saved = saved_bytes(arm["model"], samples, arm["cfg"], pad_id) / 2**20
        print(
            f"{label:>16} {arm['trainable'] / 1e6:>11.1f}M {seconds:>9.1f} {seconds / first:>6.2f} "
            f"{saved:>15.1f} MiB"
        )


if __name__ == "__main__":
    main()
