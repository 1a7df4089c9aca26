"""The policy GRPO updates and the engine that plays its episodes: the same object (HF, the CPU
engine), or a vLLM engine that gets the trained weights after each update."""

from __future__ import annotations

import torch

from searchgym.agents.policies.base import TokenizedPolicy, TrainablePolicy, check_trainable
from searchgym.agents.policies.models import resolve_chat_template
from searchgym.agents.train.config import GRPOConfig
from searchgym.registry import POLICIES


def load_policies(cfg: GRPOConfig, device: torch.device) -> tuple[TrainablePolicy, TokenizedPolicy]:
    """The trainable policy (``cfg.policy``'s backend loading ``cfg.model``) and the policy that
    plays episodes (itself, or a vLLM engine), both with ``cfg.chat_template`` where one is set."""
    policy = POLICIES.make(
        cfg.policy,
        cfg.model,
        device=str(device),
        dtype="float32",
        seed=cfg.seed,
        show_progress=cfg.progress,
        **cfg.policy_kwargs,
    )
    check_trainable(policy, cfg.policy)
    rollout_policy = policy
    if cfg.rollout_engine == "vllm":
        from searchgym.agents.policies.vllm import VLLMPolicy  # lazy: vllm is the GPU extra

        rollout_policy = VLLMPolicy(cfg.model, seed=cfg.seed)
    if cfg.chat_template is not None:
        template = resolve_chat_template(cfg.chat_template)
        for p in {id(policy): policy, id(rollout_policy): rollout_policy}.values():
            p.tokenizer.chat_template = template
    return policy, rollout_policy


def sync_rollout_weights(policy: TrainablePolicy, rollout_policy: TokenizedPolicy) -> None:
    """Push ``policy``'s trained weights into a separate rollout engine (vLLM); nothing to do
    when the rollout policy is ``policy`` itself."""
    if rollout_policy is not policy:
        weights = policy.model.state_dict().items()
        rollout_policy.load_weights((name, p.detach()) for name, p in weights)
