"""Warm start: supervised fine-tuning on a scripted agent's episodes, so that a small model
knows the action protocol before RL (`warm_start`, as `train` runs it).

The episodes are recorded as the very token streams `PolicyAgent` builds when a model writes
those actions (the same chat template pieces, inline results, masks and turn boundaries): the
scripted agent's text is handed to `PolicyAgent` through a policy that "generates" exactly that
text. What SFT trains on is therefore what GRPO will later sample and score.

    trajectories = oracle_trajectories([env], tasks, policy.tokenizer)
    losses = sft(policy.model, trajectories, lr=1e-4, epochs=2)
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Literal

import gymnasium as gym
import torch
from tqdm.auto import tqdm

from searchgym.agents.play.episode import Episode
from searchgym.agents.play.rollout import rollout
from searchgym.agents.policies.agent import PolicyAgent, Trajectory
from searchgym.agents.policies.base import Completion, Message, SamplingParams
from searchgym.agents.registry import is_policy_agent, make_agent
from searchgym.agents.train.config import GRPOConfig
from searchgym.agents.train.schedule import make_env, split_warm_start
from searchgym.agents.train.scoring import model_device, right_pad, target_logprobs
from searchgym.errors import ConfigError, TrainingDiverged
from searchgym.tasks.task import Task

logger = logging.getLogger(__name__)


class _Dictation:
    """A `Policy` that writes the text it was given: the tokens a model would produce for it,
    ending with the end-of-sequence token unless a stop string ends it (as generation would)."""

    name = "dictation"

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.text = ""

    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[Completion]:
        ids = list(self.tokenizer.encode(self.text, add_special_tokens=False))
        if not any(self.text.endswith(s) for s in params.stop):
            ids.append(self.tokenizer.eos_token_id)
        return [Completion(self.text, list(ids), [], "stop") for _ in prompts]

    def chat(self, conversations: Sequence[Sequence[Message]], params: SamplingParams) -> list[Completion]:
        raise NotImplementedError("a dictation is driven by token ids through PolicyAgent")


class _Recorded:
    """An agent that plays ``script``'s actions and records them as `PolicyAgent` would."""

    def __init__(self, script: Any, tokenizer: Any, system_prompt: str | None, inline: bool | None) -> None:
        self.script = script
        self.dictation = _Dictation(tokenizer)
        self.agent = PolicyAgent(self.dictation, system_prompt=system_prompt, inline=inline)

    @property
    def trajectory(self) -> Trajectory | None:
        return self.agent.trajectory

    def reset(self, info: dict[str, Any]) -> None:
        self.script.reset(info)
        self.agent.reset(info)

    def act(self, observation: str) -> str:
        self.dictation.text = self.script.act(observation)
        action = self.agent.act(observation)
        if getattr(self.script, "untrained", False):  # a scripted mistake (`RecoveringOracleAgent`)
            trajectory = self.agent.trajectory
            start, end = trajectory.turn_starts[-1], trajectory.turn_ends[-1]
            trajectory.mask[start:end] = [0] * (end - start)
        return action


def oracle_trajectories(
    envs: Sequence[gym.Env | Callable[[], gym.Env]], tasks: Sequence[Task], tokenizer: Any, **options: Any
) -> list[Trajectory]:
    """The token streams of `scripted_episodes` (the same arguments): what SFT trains on."""
    return [episode.trajectory for episode in scripted_episodes(envs, tasks, tokenizer, **options)]


def scripted_episodes(
    envs: Sequence[gym.Env | Callable[[], gym.Env]],
    tasks: Sequence[Task],
    tokenizer: Any,
    *,
    agent: str = "oracle",
    system_prompt: str | None = None,
    inline: bool | None = None,
    seed: int = 0,
) -> list[Episode]:
    """Scripted ``agent`` (a registered name or ``module:attr``) playing every task once, in task
    order, recorded as a `PolicyAgent` with ``tokenizer``'s chat template, ``system_prompt`` and
    ``inline`` would record it: each episode with its rewards, and as ``episode.trajectory`` its
    token stream (mask 1 on the actions). ``envs`` are environments or functions that make one
    (those are closed after); task ``i`` is reset with seed ``seed + i``."""
    if is_policy_agent(agent):
        raise ConfigError(f"warm start records a scripted agent (see searchgym.list_agents()), not {agent!r}")
    if not envs:
        raise ConfigError("scripted_episodes needs at least one env")
    # make_agent raises on an unknown name, suggesting the closest one
    agents = [_Recorded(make_agent(agent, seed), tokenizer, system_prompt, inline) for _ in envs]
    made = [e() for e in envs if not isinstance(e, gym.Env)]
    given = iter(made)
    pool = [e if isinstance(e, gym.Env) else next(given) for e in envs]
    out: list[Episode | None] = [None] * len(tasks)
    try:
        for i, episode in rollout(pool, agents, tasks, seed=seed):
            out[i] = episode
    finally:
        for env in made:
            env.close()
    return out  # type: ignore[return-value]  (every task was played)


def sft(
    model: Any,
    trajectories: Sequence[Trajectory],
    *,
    lr: float = 5e-5,
    epochs: int = 1,
    batch_size: int = 8,
    grad_accum: int = 1,
    max_len: int = 4096,
    seed: int = 0,
    max_grad_norm: float | None = 1.0,
    schedule: Literal["linear", "constant"] = "linear",
    autocast: Callable[[], AbstractContextManager] = nullcontext,
    progress: bool = False,
    max_steps: int | None = None,
) -> list[float]:
    """Train ``model`` in place on ``trajectories``: masked negative log-likelihood, averaged
    over the mask-1 tokens of each optimizer step (``batch_size × grad_accum`` trajectories,
    reshuffled every epoch by a ``torch.Generator`` seeded with ``seed``), AdamW from ``lr``
    decaying linearly to 0 over the run (trl's SFT default) or ``constant``, gradient norm
    clipped to ``max_grad_norm``. The run is ``epochs`` passes over the data or, given
    ``max_steps`` instead, exactly that many optimizer steps (passes repeat, the last one cut
    short; the schedule decays over them). Streams longer than ``max_len`` lose their end. Each
    micro-batch's forward runs inside its own ``autocast()`` (e.g. ``accelerator.autocast``): one
    context held over the whole loop would keep its bfloat16 casts of the first step's weights,
    so that no later step saw the updates. Returns each step's loss; raises `TrainingDiverged`
    (before stepping) on a non-finite loss."""
    for name, value in (
        ("epochs", epochs),
        ("batch_size", batch_size),
        ("grad_accum", grad_accum),
        ("max_steps", 1 if max_steps is None else max_steps),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"{name} must be a positive integer, got {value!r}")
    if max_steps is not None and epochs != 1:
        raise ConfigError(f"give epochs ({epochs}) or max_steps ({max_steps}), not both")
    if not lr > 0:
        raise ConfigError(f"lr must be positive, got {lr!r}")
    if schedule not in ("linear", "constant"):
        raise ConfigError(f"schedule must be 'linear' or 'constant', got {schedule!r}")
    examples = _examples(trajectories, max_len)
    device = model_device(model)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr, weight_decay=0.0)
    generator = torch.Generator().manual_seed(seed)
    per_step = batch_size * grad_accum
    n_steps = epochs * math.ceil(len(examples) / per_step) if max_steps is None else max_steps
    decay = (lambda step: 1 - step / n_steps) if schedule == "linear" else (lambda step: 1.0)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, decay)
    losses: list[float] = []
    was_training = model.training
    model.train()
    bar = tqdm(total=n_steps, desc="SFT", disable=not progress)
    try:
        for picked in _step_order(len(examples), per_step, n_steps, generator):
            chunk = [examples[i] for i in picked]
            loss = _step(model, optimizer, chunk, batch_size, max_grad_norm, device, autocast)
            if not math.isfinite(loss):
                raise TrainingDiverged(f"the SFT loss is {loss} at step {len(losses)}; lower lr")
            losses.append(loss)
            scheduler.step()
            bar.update()
            bar.set_postfix(loss=f"{loss:.3f}")
    finally:
        bar.close()
        model.train(was_training)
        optimizer.zero_grad(set_to_none=True)
    return losses


def _step_order(n: int, per_step: int, n_steps: int, generator: torch.Generator) -> Iterator[list[int]]:
    """The example indices of each of ``n_steps`` steps: passes over ``range(n)`` in an order
    drawn from ``generator`` at the start of each pass, ``per_step`` at a time (fewer at the end
    of a pass)."""
    taken = 0
    while True:
        order = torch.randperm(n, generator=generator).tolist()
        for start in range(0, n, per_step):
            yield order[start : start + per_step]
            taken += 1
            if taken == n_steps:
                return


def _examples(trajectories: Sequence[Trajectory], max_len: int) -> list[tuple[list[int], list[int]]]:
    """``(ids, mask)`` of each stream cut to ``max_len``; streams left with no token to learn
    from are dropped."""
    if isinstance(max_len, bool) or not isinstance(max_len, int) or max_len < 2:
        raise ConfigError(f"max_len must be an integer >= 2, got {max_len!r}")
    examples = []
    for traj in trajectories:
        ids = (traj.prompt_ids + traj.ids)[:max_len]
        mask = ([0] * len(traj.prompt_ids) + traj.mask)[:max_len]
        mask[0] = 0  # nothing predicts the first token
        if any(mask):
            examples.append((ids, mask))
    if len(examples) < len(trajectories):
        skipped = len(trajectories) - len(examples)
        logger.warning("%d trajectories have no policy token within max_len=%d; skipped", skipped, max_len)
    if not examples:
        raise ConfigError(f"no trajectory has a policy token within max_len={max_len}; raise max_len")
    return examples


def _step(
    model: Any,
    optimizer: torch.optim.Optimizer,
    chunk: Sequence[tuple[list[int], list[int]]],
    batch_size: int,
    max_grad_norm: float | None,
    device: torch.device,
    autocast: Callable[[], AbstractContextManager],
) -> float:
    """One optimizer step over ``chunk`` in micro-batches; the loss is the mean over all of the
    chunk's mask-1 tokens, however they fall into micro-batches."""
    n_tokens = sum(sum(mask) for _, mask in chunk)
    optimizer.zero_grad(set_to_none=True)
    total = 0.0
    for start in range(0, len(chunk), batch_size):
        micro = chunk[start : start + batch_size]
        ids, attention, target = right_pad([i for i, _ in micro], [m for _, m in micro], device=device)
        with autocast():
            loss = -target_logprobs(model, ids, attention, target).sum() / n_tokens
        loss.backward()
        total += float(loss.detach())
    if math.isfinite(total):
        if max_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
        optimizer.step()
    return total


def warm_start(cfg: GRPOConfig, model: Any, tokenizer: Any, accelerator: Any) -> list[float]:
    """Supervised fine-tuning on ``cfg.warm_start_agent``'s episodes of training tasks, so that a
    small model knows the action protocol before RL; returns the per-step losses."""
    env = make_env(cfg, cfg.train_split)
    chosen, _ = split_warm_start(list(env.unwrapped.tasks), cfg)
    env.close()
    trajectories = oracle_trajectories(
        [make_env(cfg, cfg.train_split)], chosen, tokenizer, agent=cfg.warm_start_agent, seed=cfg.seed
    )
    # the steps of warm_start_batch_size episodes, in micro-batches no larger than the GRPO update's
    micro = math.gcd(cfg.warm_start_batch_size, cfg.micro_batch_size)
    return sft(
        model,
        trajectories,
        lr=cfg.warm_start_lr,
        epochs=cfg.warm_start_epochs,
        batch_size=micro,
        grad_accum=cfg.warm_start_batch_size // micro,
        seed=cfg.seed,
        autocast=accelerator.autocast,  # bfloat16 where `bf16` asks for it, as in the GRPO update
        progress=cfg.progress,
    )
