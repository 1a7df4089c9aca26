"""The tiny training run the trainer's tests share: two steps of 2 tasks × 2 episodes on a
300-passage world, short turns, a checkpoint every step."""

import torch
from safetensors.torch import load_file

from searchgym.agents.train.config import GRPOConfig


def tiny_config(model_dir, run_dir, **overrides) -> GRPOConfig:
    values = dict(
        model=str(model_dir),
        env="searchgym/FictionalQA-BM25-v0",
        env_kwargs={"n_passages": 300, "max_obs_tokens": 64},
        run_dir=str(run_dir),
        steps=2,
        tasks_per_step=2,
        group_size=2,
        max_turns=2,
        max_new_tokens=8,
        lr=1e-3,
        # a random model never answers right: information gain makes rewards differ
        rewards={"terms": {"info_gain": 1.0}},
        micro_batch_size=3,
        eval_tasks=2,
        checkpoint_every=1,
        keep_checkpoints=3,
        progress=False,
        tensorboard=False,
    )
    return GRPOConfig(**(values | overrides))


def weights(run_dir, step) -> dict[str, torch.Tensor]:
    """The model weights saved at ``step``."""
    return load_file(run_dir / "checkpoints" / f"step-{step:06d}" / "model.safetensors")
