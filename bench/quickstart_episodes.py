"""Episodes of the main job's 2-hop training tasks played by the CPU engine: the material that
`info_gain.py` and `int8_rollout.py` measure on (a helper module of theirs, not a bench)."""

from __future__ import annotations

from searchgym.agents.play.rollout import run_episodes
from searchgym.agents.policies.agent import PolicyAgent
from searchgym.agents.train.config import load_config
from searchgym.agents.train.schedule import make_env
from searchgym.generation import SamplingParams
from searchgym.registry import POLICIES


def play(model: str, config: str, n: int, temperature: float | None = None):
    """``(cfg, policy, env, episodes)``: the first ``n`` training tasks of ``config``'s env (its turn
    limit and tokens per turn), played side by side by a float32 CPU engine loaded from ``model``, at
    ``temperature`` (the config's if None)."""
    cfg = load_config(config, [f"model={model}"])
    policy = POLICIES.make("cpu", model, device="cpu", dtype="float32", seed=0, show_progress=False)
    env = make_env(cfg, "train")
    tasks = list(env.unwrapped.tasks)[:n]
    params = SamplingParams(
        max_new_tokens=cfg.max_new_tokens, temperature=cfg.temperature if temperature is None else temperature
    )
    episodes = run_episodes(
        lambda: make_env(cfg, "train"), lambda: PolicyAgent(policy, params), tasks, n_envs=len(tasks), seed=0
    )
    return cfg, policy, env, episodes
