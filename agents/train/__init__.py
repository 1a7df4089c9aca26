"""Training: GRPO (`grpo.train`), its config, math, episodes, warm start, checkpoints and metrics log."""
