"""Would int8 weights make CPU rollouts faster without changing the policy? PyTorch's dynamic
int8 quantization (fbgemm) of the decoder's linear layers, against the float32 model it copies.

    python bench/int8_rollout.py --model runs/quickstart/checkpoints/step-000000

The float32 policy plays ``--episodes`` greedy episodes of the quickstart's 2-hop training tasks
(``configs/quickstart.yaml``). Each quantized copy then reads the same episodes, and the bench
prints, over the policy's own tokens: the mean KL divergence from the float32 policy's next-token
distribution to the copy's (nats a token), how often the copy's most likely token is the float32
policy's, and the copy's time for the forwards a rollout is made of (a decoding step of 16 rows,
a 200-token prefill) as a ratio to float32's. The copies are: every linear layer of the decoder
blocks, weights quantized per tensor or per output channel, and per channel with the MLPs' down
projections left in float32 (the layer whose inputs have the largest outliers in small Llamas).
"""

from __future__ import annotations

import argparse
import copy
import time
import warnings

import quickstart_episodes  # bench/'s helper: the script's folder is on sys.path
import torch


def quantized(model: torch.nn.Module, per_channel: bool, skip: str | None) -> torch.nn.Module:
    from torch.ao.quantization import default_dynamic_qconfig, per_channel_dynamic_qconfig

    qconfig = per_channel_dynamic_qconfig if per_channel else default_dynamic_qconfig
    names = {
        name: qconfig
        for name, module in model.named_modules()
        if isinstance(module, torch.nn.Linear) and ".layers." in name and (skip is None or skip not in name)
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.ao.quantization says it is deprecated (for torchao)
        return torch.ao.quantization.quantize_dynamic(copy.deepcopy(model), names, dtype=torch.qint8)


@torch.inference_mode()
def policy_logprobs(model: torch.nn.Module, trajectories) -> torch.Tensor:
    """Log-softmax [N, V] of the next-token distributions before every policy token."""
    out = []
    for traj in trajectories:
        ids = torch.tensor([traj.prompt_ids + traj.ids])
        before = torch.tensor([0] * (len(traj.prompt_ids) - 1) + traj.mask + [0], dtype=torch.bool)
        out.append(torch.log_softmax(model(input_ids=ids).logits[0, before].float(), -1))
    return torch.cat(out)


@torch.inference_mode()
def seconds(model: torch.nn.Module, ids: torch.Tensor, repeats: int) -> float:
    model(input_ids=ids, logits_to_keep=1)
    start = time.perf_counter()
    for _ in range(repeats):
        model(input_ids=ids, logits_to_keep=1)
    return (time.perf_counter() - start) / repeats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--config", default="configs/quickstart.yaml")
    parser.add_argument("--episodes", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    _, policy, _, episodes = quickstart_episodes.play(args.model, args.config, args.episodes, temperature=0.0)
    trajectories = [ep.trajectory for ep in episodes]
    model = policy.model.eval()
    reference = policy_logprobs(model, trajectories)
    decode, prefill = torch.randint(0, 1000, (16, 1)), torch.randint(0, 1000, (1, 200))
    base = (seconds(model, decode, args.repeats), seconds(model, prefill, args.repeats))
    print(f"{len(episodes)} greedy episodes, {len(reference)} policy tokens")
    print(
        f"{'copy':28s} {'KL nats/token':>14s} {'same argmax':>12s} {'decode 16 x1':>13s} {'prefill 200':>12s}"
    )
    for name, per_channel, skip in [
        ("int8 per tensor", False, None),
        ("int8 per channel", True, None),
        ("int8 per channel, fp32 down", True, "mlp.down_proj"),
    ]:
        copy_ = quantized(model, per_channel, skip)
        logp = policy_logprobs(copy_, trajectories)
        kl = float((reference.exp() * (reference - logp)).sum(-1).mean())
        same = float((reference.argmax(-1) == logp.argmax(-1)).float().mean())
        ratios = [b / seconds(copy_, ids, args.repeats) for b, ids in zip(base, (decode, prefill))]
        print(f"{name:28s} {kl:14.3f} {same:12.3f} {ratios[0]:12.2f}x {ratios[1]:11.2f}x")


if __name__ == "__main__":
    main()
