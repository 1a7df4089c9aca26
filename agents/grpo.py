"""GRPO for multi-turn search agents: the config, the math as pure functions, then `train(cfg)`.

One step: take the next ``tasks_per_step`` training tasks, play ``group_size`` sampled episodes of
each (all envs batched into one generation call per turn, `agents.rollout`), score them with the
env's rewards (outcome, format, cost) plus, optionally, information gain (IGPO), turn rewards into
per-token advantages within each group, and take one optimizer step on the clipped policy-gradient
loss over the policy's own tokens (observation, template and self-search information tokens have
mask 0 and get no gradient). The importance ratio compares the current policy with the log-probs
the sampler recorded.

Reading order: `GRPOConfig`; advantage estimators (`group_advantages`, `stratified_advantages`,
`igpo_advantages`); the loss (`kl_k3`, `policy_loss`); token bookkeeping (`Sample`, `collate`,
`token_logprobs`); `train`.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import json
import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch

from searchgym.agents.scoring import target_logits
from searchgym.config_types import check_field_types, parse_yaml, read_yaml
from searchgym.envs.registry import check_rewards
from searchgym.errors import ConfigError

Advantage = Literal["grpo", "dr_grpo", "stratified", "igpo"]
Aggregation = Literal["token_mean", "grpo", "dr_grpo"]
RolloutEngine = Literal["hf", "vllm"]
logger = logging.getLogger(__name__)


@dataclass
class GRPOConfig:
    """Everything `train` needs; `load_config` reads it from YAML (unknown keys are an error)."""

    # -- what to train, where
    model: str = "smollm2-135m-instruct"
    """Policy to start from: the offline alias, a hub id or a local directory."""
    env: str = "searchgym/FictionalQA-BM25-v0"
    """Registered env id; it must accept ``split`` (train on ``train_split``, evaluate on ``eval_split``)."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """Extra arguments of the env factory (e.g. ``hops: [2]``, ``n_passages``)."""
    train_split: str = "train"
    eval_split: str = "dev"
    run_dir: str = "runs/grpo"
    """Checkpoints, metrics.jsonl, TensorBoard logs and plots go here."""
    seed: int = 0

    # -- rollout
    steps: int = 100
    """Optimizer steps of GRPO (each on one rollout batch)."""
    tasks_per_step: int = 4
    """Tasks per step (summed over processes under `accelerate launch`)."""
    group_size: int = 8
    """Episodes per task (G); advantages compare episodes within a group."""
    max_turns: int = 4
    max_new_tokens: int = 128
    """Tokens the policy may write per turn."""
    temperature: float = 1.0
    top_p: float = 1.0
    rollout_engine: RolloutEngine = "hf"
    """``vllm`` (GPU extra) generates with vLLM and receives the weights after every update."""

    # -- rewards (the env's components, plus information gain computed here)
    rewards: dict[str, Any] = field(default_factory=dict)
    """The env's `RewardWeights`: outcome_metric, outcome, format, per_search, per_1k_obs_tokens,
    cost_only_if_correct."""
    info_gain: float = 0.0
    """Weight of the information-gain reward (IGPO); with ``advantage: igpo`` it is at least 1."""

    # -- advantages and loss
    advantage: Advantage = "grpo"
    """grpo (group z-score), dr_grpo (no std), stratified (within equal search counts, blended with
    grpo), igpo (turn-level: information gain per turn, outcome at the end)."""
    stratified_alpha: float = 0.5
    """Stratified: weight of the within-stratum advantage against the group one."""
    igpo_gamma: float = 1.0
    """IGPO: discount of later turns' rewards."""
    loss_aggregation: Aggregation = "token_mean"
    """token_mean (every policy token weighs the same, DAPO), grpo (mean per episode, then over
    episodes), dr_grpo (sum over tokens / (episodes x max_turns x max_new_tokens))."""
    clip_low: float = 0.2
    clip_high: float = 0.2
    kl_coef: float = 0.0
    """Weight of the k3 KL to the policy GRPO starts from, after the warm start (0: no reference
    model is kept)."""
    updates_per_step: int = 1
    """Optimizer steps on each rollout batch (mu); above 1 the importance ratio departs from 1."""

    # -- optimisation
    lr: float = 1e-6
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    micro_batch_size: int = 4
    """Episodes per forward/backward; gradients accumulate over the step's whole batch."""
    bf16: bool | None = None
    """bfloat16 autocast; None: where the GPU supports it (never on CPU)."""

    # -- warm start: SFT on the oracle agent's episodes before GRPO
    warm_start_episodes: int = 0
    """Episodes of ``warm_start_agent`` to fine-tune on first (0: no warm start)."""
    warm_start_agent: str = "oracle"
    """The scripted agent whose episodes the warm start imitates (a name in `AGENTS`)."""
    warm_start_epochs: int = 1
    warm_start_lr: float = 5e-5
    warm_start_batch_size: int = 8

    # -- evaluation, checkpoints, logging
    eval_tasks: int = 64
    """Dev tasks evaluated greedily before and after training, and before the warm start when
    there is one (0: none)."""
    eval_every: int = 0
    """Also evaluate every this many steps (0: only before and after)."""
    checkpoint_every: int = 10
    keep_checkpoints: int = 2
    """The newest checkpoints kept; step 0 (the start of GRPO, the KL reference) is kept besides."""
    resume: bool = False
    """Continue from the newest checkpoint in ``run_dir``."""
    overwrite: bool = False
    """Start afresh in a ``run_dir`` that holds checkpoints (its later checkpoints are deleted)."""
    tensorboard: bool | None = None
    """None: log to TensorBoard when it is installed."""
    progress: bool = True

    def __post_init__(self) -> None:
        check_field_types(self)
        _check_choice("advantage", self.advantage, Advantage)
        _check_choice("loss_aggregation", self.loss_aggregation, Aggregation)
        _check_choice("rollout_engine", self.rollout_engine, RolloutEngine)
        if self.group_size < 2:
            raise ConfigError(
                f"group_size must be >= 2 (GRPO compares episodes of a task), got {self.group_size}"
            )
        for name in (
            "steps",
            "tasks_per_step",
            "max_turns",
            "max_new_tokens",
            "micro_batch_size",
            "updates_per_step",
            "checkpoint_every",
            "keep_checkpoints",
            "warm_start_epochs",
            "warm_start_batch_size",
        ):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.temperature <= 0:
            raise ConfigError(f"temperature must be > 0: GRPO needs sampled episodes, got {self.temperature}")
        if not 0 <= self.clip_low < 1 or self.clip_high < 0:
            raise ConfigError(
                f"need 0 <= clip_low < 1 and clip_high >= 0, got {self.clip_low}, {self.clip_high}"
            )
        if not 0 <= self.stratified_alpha <= 1 or not 0 < self.igpo_gamma <= 1:
            raise ConfigError("stratified_alpha must be in [0, 1] and igpo_gamma in (0, 1]")
        if (
            min(
                self.kl_coef,
                self.info_gain,
                self.lr,
                self.eval_tasks,
                self.eval_every,
                self.warm_start_episodes,
            )
            < 0
        ):
            raise ConfigError(
                "kl_coef, info_gain, lr, eval_tasks, eval_every and warm_start_episodes must be >= 0"
            )
        check_rewards(self.env, self.rewards)  # unknown or bad weights fail here, not at the first step
        from searchgym.agents.registry import AGENTS

        if self.warm_start_agent not in AGENTS:
            raise ConfigError(
                f"warm_start_agent must be a scripted agent ({', '.join(AGENTS)}), "
                f"got {self.warm_start_agent!r}"
            )

    @property
    def info_gain_weight(self) -> float:
        return max(self.info_gain, 1.0) if self.advantage == "igpo" else self.info_gain


def _check_choice(name: str, value: Any, choices: Any) -> None:
    allowed = choices.__args__
    if value not in allowed:
        raise ConfigError(f"{name} must be one of {', '.join(allowed)}; got {value!r}")


def load_config(path: str | Path | None = None, overrides: Sequence[str] = ()) -> GRPOConfig:
    """A `GRPOConfig` from a YAML file and ``key=value`` overrides (values parsed as YAML).

    >>> load_config(None, ["steps=3", "rewards={per_search: 0.1}"]).rewards
    {'per_search': 0.1}
    """
    values: dict[str, Any] = {}
    if path is not None:
        try:
            values = read_yaml(path) or {}
        except FileNotFoundError:
            raise ConfigError(f"config file {path} does not exist") from None
        if not isinstance(values, dict):
            raise ConfigError(f"{path} must hold a mapping of config keys, got {type(values).__name__}")
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep:
            raise ConfigError(f"overrides look like key=value, got {item!r}")
        values[key.strip()] = parse_yaml(raw, f"--set {key.strip()}")
    known = {f.name for f in dataclasses.fields(GRPOConfig)}
    unknown = sorted(set(values) - known)
    if unknown:
        import difflib

        hints = [
            f"{k} (did you mean {m[0]}?)" if (m := difflib.get_close_matches(k, known, 1)) else k
            for k in unknown
        ]
        raise ConfigError(f"unknown config key(s): {', '.join(hints)}")
    return GRPOConfig(**values)


# ---------------------------------------------------------------- advantages (pure functions)


def group_advantages(rewards: torch.Tensor, *, scale: bool = True, eps: float = 1e-6) -> torch.Tensor:
    """Advantages of ``rewards`` [groups, G]: minus the group mean, and (GRPO; not Dr.GRPO)
    divided by the group's standard deviation. A group whose rewards are all equal gets zeros.

    >>> group_advantages(torch.tensor([[1.0, 0.0], [2.0, 2.0]]), scale=False)
    tensor([[ 0.5000, -0.5000],
            [ 0.0000,  0.0000]])
    """
    centred = rewards - rewards.mean(dim=1, keepdim=True)
    return centred / (rewards.std(dim=1, keepdim=True) + eps) if scale else centred


def degenerate_groups(rewards: torch.Tensor, tol: float = 1e-8) -> torch.Tensor:
    """Which groups of ``rewards`` [groups, G] have all rewards equal (no learning signal).

    >>> degenerate_groups(torch.tensor([[1.0, 1.0], [0.0, 1.0]]))
    tensor([ True, False])
    """
    return (rewards.max(dim=1).values - rewards.min(dim=1).values) <= tol


def stratified_advantages(
    rewards: torch.Tensor, strata: torch.Tensor, *, alpha: float = 0.5, eps: float = 1e-6
) -> torch.Tensor:
    """Stratified GRPO: within each group, z-score each episode against the episodes of its own
    stratum (equal ``strata`` value, e.g. the number of searches; a stratum of one gets 0), then
    blend ``alpha * stratified + (1 - alpha) * group_advantages``.

    >>> r, s = torch.tensor([[1.0, 0.0, 1.0, 1.0]]), torch.tensor([[0, 0, 1, 1]])
    >>> stratified_advantages(r, s, alpha=1.0)
    tensor([[ 0.7071, -0.7071,  0.0000,  0.0000]])
    """
    within = torch.zeros_like(rewards)
    for g in range(rewards.shape[0]):
        for value in strata[g].unique():
            members = strata[g] == value
            if int(members.sum()) > 1:
                r = rewards[g, members]
                within[g, members] = (r - r.mean()) / (r.std() + eps)
    return alpha * within + (1 - alpha) * group_advantages(rewards, eps=eps)


def igpo_advantages(
    turn_rewards: Sequence[Sequence[Sequence[float]]], *, gamma: float = 1.0, eps: float = 1e-6
) -> list[list[list[float]]]:
    """IGPO's turn-level advantages. ``turn_rewards[g][i][t]`` is episode i of group g's reward at
    turn t (information gain for t < T, the outcome at the last turn). All turn rewards of a group
    are z-scored together, then each turn's advantage is the discounted sum of its own and later
    turns' scores.

    >>> [[round(a, 4) for a in episode] for episode in igpo_advantages([[[0.0, 1.0], [0.0]]])[0]]
    [[0.5773, 1.1547], [-0.5773]]
    """
    out: list[list[list[float]]] = []
    for group in turn_rewards:
        pooled = torch.tensor([r for episode in group for r in episode], dtype=torch.float64)
        mean = pooled.mean()
        std = pooled.std() if len(pooled) > 1 else torch.tensor(0.0, dtype=torch.float64)
        advantages = []
        for episode in group:
            z = [(r - mean.item()) / (std.item() + eps) for r in episode]
            running, acc = 0.0, []
            for score in reversed(z):
                running = score + gamma * running
                acc.append(running)
            advantages.append(acc[::-1])
        out.append(advantages)
    return out


# ---------------------------------------------------------------- the loss (pure functions)


def kl_k3(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimate of KL(policy || reference): ``exp(ref - logp) - (ref - logp) - 1``,
    never negative, zero where the two agree.

    >>> kl_k3(torch.tensor([-1.0, -2.0]), torch.tensor([-1.0, -1.0]))
    tensor([0.0000, 0.7183])
    """
    delta = ref_logp - logp
    return torch.exp(delta) - delta - 1


@dataclass(frozen=True)
class LossNorm:
    """Totals over a whole step's batch that the loss divides by, so that the losses of its
    micro-batches add up to the loss of the batch."""

    episodes: int
    tokens: int
    """Policy tokens (mask 1) in the batch."""
    max_tokens: int
    """Dr.GRPO's constant: the most policy tokens one episode can have."""


def aggregate(values: torch.Tensor, mask: torch.Tensor, how: Aggregation, norm: LossNorm) -> torch.Tensor:
    """Reduce per-token ``values`` [B, L] over the tokens where ``mask`` is 1.

    >>> v, m = torch.tensor([[1.0, 3.0], [2.0, 0.0]]), torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    >>> [aggregate(v, m, how, LossNorm(2, 3, 4)).item() for how in ("token_mean", "grpo", "dr_grpo")]
    [2.0, 2.0, 0.75]
    """
    masked = values * mask
    if how == "token_mean":
        return masked.sum() / max(norm.tokens, 1)
    if how == "grpo":
        return (masked.sum(dim=1) / mask.sum(dim=1).clamp(min=1)).sum() / max(norm.episodes, 1)
    return masked.sum() / max(norm.episodes * norm.max_tokens, 1)


def policy_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    norm: LossNorm,
    aggregation: Aggregation = "token_mean",
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    ref_logp: torch.Tensor | None = None,
    kl_coef: float = 0.0,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The clipped policy-gradient loss (plus ``kl_coef`` x k3 KL to the reference) over the
    policy tokens (``mask`` 1) of a micro-batch; all tensors are [B, L] and aligned. Returns the
    loss and sums for logging: ``tokens``, ``clipped`` (tokens whose ratio was clipped), ``kl``
    and ``ratio``.

    >>> t = torch.zeros(1, 2)
    >>> loss, stats = policy_loss(t, t, torch.tensor([[1.0, -1.0]]), torch.ones(1, 2), norm=LossNorm(1, 2, 2))
    >>> loss.item(), stats["clipped"]
    (0.0, 0.0)
    """
    ratio = torch.exp(logp - old_logp)
    clipped_ratio = ratio.clamp(1 - clip_low, 1 + clip_high)
    per_token = -torch.minimum(ratio * advantages, clipped_ratio * advantages)
    kl = kl_k3(logp, ref_logp) if ref_logp is not None else torch.zeros_like(logp)
    if ref_logp is not None and kl_coef:
        per_token = per_token + kl_coef * kl
    loss = aggregate(per_token, mask, aggregation, norm)
    with torch.no_grad():
        clipped = ((ratio < 1 - clip_low) & (advantages < 0)) | ((ratio > 1 + clip_high) & (advantages > 0))
        stats = {
            "tokens": float(mask.sum()),
            "clipped": float((clipped * mask).sum()),
            "kl": float((kl * mask).sum()),
            "ratio": float((ratio * mask).sum()),
        }
    return loss, stats


# ---------------------------------------------------------------- token bookkeeping


@dataclass
class Sample:
    """One episode for the loss: ``ids`` (prompt, then the episode's tokens from ``start``) and,
    per token from ``start`` on, its mask, sampling log-prob and advantage."""

    ids: list[int]
    start: int
    mask: list[int]
    old_logprobs: list[float]
    advantages: list[float]


def collate(samples: Sequence[Sample], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-padded tensors. ``input_ids``/``attention_mask`` are [B, L]; ``mask``,
    ``old_logprobs`` and ``advantages`` are [B, L - 1], aligned with the targets ``input_ids[:, 1:]``
    (position j scores token j + 1).

    >>> b = collate([Sample([5, 6, 7], 1, [1, 0], [-0.5, 0.0], [2.0, 2.0])], pad_id=0)
    >>> b["mask"].tolist(), b["advantages"].tolist()
    ([[1.0, 0.0]], [[2.0, 2.0]])
    """
    length = max(len(s.ids) for s in samples)
    batch = {
        "input_ids": torch.full((len(samples), length), pad_id, dtype=torch.long),
        "attention_mask": torch.zeros(len(samples), length, dtype=torch.long),
        **{name: torch.zeros(len(samples), length - 1) for name in ("mask", "old_logprobs", "advantages")},
    }
    for i, s in enumerate(samples):
        if not len(s.mask) == len(s.old_logprobs) == len(s.advantages) == len(s.ids) - s.start:
            raise ValueError(f"sample {i}: mask, log-probs and advantages must cover ids[start:]")
        if s.start < 1:
            raise ValueError(f"sample {i}: the prompt must have at least one token")
        batch["input_ids"][i, : len(s.ids)] = torch.tensor(s.ids)
        batch["attention_mask"][i, : len(s.ids)] = 1
        targets = slice(s.start - 1, len(s.ids) - 1)
        batch["mask"][i, targets] = torch.tensor(s.mask, dtype=torch.float)
        batch["old_logprobs"][i, targets] = torch.tensor(s.old_logprobs)
        batch["advantages"][i, targets] = torch.tensor(s.advantages)
    return batch


def token_logprobs(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    mask: torch.Tensor,
    temperature: float = 1.0,
    *,
    with_entropy: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probs [B, L - 1] of each next token under ``softmax(logits / temperature)`` where
    ``mask`` [B, L - 1] is 1 (0 elsewhere), and with ``with_entropy`` the summed entropy of those
    distributions (without gradient). Logits are computed only where ``mask`` is 1 when the model
    takes ``logits_to_keep`` (transformers models do): a vocabulary-sized row per policy token,
    none for the prompt and observations."""
    picked = mask.bool()
    targets = torch.zeros_like(input_ids, dtype=torch.bool)
    targets[:, 1:] = picked
    logits = target_logits(model, input_ids, attention_mask, targets) / temperature
    log_norm = logits.logsumexp(dim=-1)
    flat = logits.gather(1, input_ids[targets][:, None])[:, 0] - log_norm
    logp = torch.zeros(mask.shape, dtype=flat.dtype, device=flat.device).masked_scatter(picked, flat)
    entropy = None
    if with_entropy:
        with torch.no_grad():
            entropy = (log_norm - (logits.softmax(-1) * logits).sum(-1)).sum()
    return logp, entropy


# ---------------------------------------------------------------- training


def train(cfg: GRPOConfig) -> dict[str, Any]:
    """Train ``cfg.model`` with GRPO on ``cfg.env``; returns the dev metrics as loaded (with a
    warm start: ``eval_base``), before GRPO and after it,
    the steps run and the wall time (also written to ``run_dir/summary.json``). Runs as one
    process or under ``accelerate launch`` (data parallel: each process plays its share of the
    step's tasks; gradients are summed across processes)."""
    from accelerate import Accelerator
    from tqdm.auto import tqdm

    from searchgym.agents import train_episodes as episodes
    from searchgym.agents.checkpoint import latest_checkpoint, load_checkpoint, save_checkpoint
    from searchgym.agents.train_log import MetricsLog
    from searchgym.run_dir import claim_run_dir

    start_time = time.perf_counter()
    run_dir = Path(cfg.run_dir)
    _lock = claim_run_dir(run_dir, resume=cfg.resume, overwrite=cfg.overwrite)  # held until train returns
    accelerator = Accelerator(
        cpu=not torch.cuda.is_available(), mixed_precision="bf16" if _use_bf16(cfg) else "no"
    )
    main = accelerator.is_main_process
    policy, rollout_policy = episodes.load_policies(cfg, accelerator.device)
    model, tokenizer = policy.model, policy.tokenizer
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    wrapped, optimizer = accelerator.prepare(model, optimizer)
    envs = [
        episodes.make_env(cfg, cfg.train_split)
        for _ in range(episodes.per_process(cfg.tasks_per_step, accelerator) * cfg.group_size)
    ]
    _, train_tasks = episodes.split_warm_start(list(envs[0].unwrapped.tasks), cfg)
    if main:
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "config.json").write_text(json.dumps(dataclasses.asdict(cfg), indent=2), encoding="utf-8")

    def checkpoint_at(step: int) -> None:
        if main:
            data_state = {"tasks_seen": step * cfg.tasks_per_step}
            save_checkpoint(
                run_dir,
                step,
                model=model,
                optimizer=optimizer,
                tokenizer=tokenizer,
                data_state=data_state,
                extra={"eval_before": before, "eval_base": base},
                keep=cfg.keep_checkpoints,
            )
        accelerator.wait_for_everyone()

    start_step, base, before = 0, None, None
    checkpoint = latest_checkpoint(run_dir) if cfg.resume else None
    if cfg.resume and checkpoint is None:
        logger.warning("resume: no checkpoint in %s; starting from scratch", run_dir)
    if checkpoint is not None:
        state = load_checkpoint(checkpoint, model=model, optimizer=optimizer)
        start_step, before = state["step"], state["extra"].get("eval_before")
        base = state["extra"].get("eval_base")
        episodes.sync_rollout_weights(rollout_policy, model)
    else:
        if cfg.warm_start_episodes:
            base = episodes.evaluate(cfg, rollout_policy, accelerator) if cfg.eval_tasks else None
            episodes.warm_start(cfg, model, tokenizer, accelerator)
            episodes.sync_rollout_weights(rollout_policy, model)
        before = episodes.evaluate(cfg, rollout_policy, accelerator) if cfg.eval_tasks else None
        checkpoint_at(0)
    ref_model = _reference_model(model, run_dir, start_step) if cfg.kl_coef > 0 else None

    log = MetricsLog(run_dir, tensorboard=cfg.tensorboard) if main else None
    if log is not None:
        log.truncate_after(start_step)
        if before is not None and start_step == 0:
            log.log(0, {f"eval/{k}": v for k, v in before.items()})
    bar = tqdm(total=cfg.steps, initial=start_step, desc="GRPO", disable=not (cfg.progress and main))
    for step in range(start_step, cfg.steps):
        tick = time.perf_counter()
        tasks = episodes.step_tasks(train_tasks, step, cfg, accelerator)
        groups = episodes.play_groups(
            rollout_policy, envs, tasks, cfg, seed=episodes.step_seed(cfg, step, accelerator)
        )
        rollout_s = time.perf_counter() - tick
        samples, metrics = episodes.score_groups(groups, cfg, model, tokenizer, envs[0].unwrapped.protocol)
        for _ in range(cfg.updates_per_step):
            metrics |= _update(
                wrapped, ref_model, optimizer, samples, cfg, accelerator, tokenizer.pad_token_id
            )
        episodes.sync_rollout_weights(rollout_policy, model)
        metrics = _mean_over_processes(metrics, accelerator)
        metrics |= {"time/rollout_s": rollout_s, "time/step_s": time.perf_counter() - tick}
        done = step + 1
        if cfg.eval_every and done % cfg.eval_every == 0 and done < cfg.steps:
            metrics |= {
                f"eval/{k}": v for k, v in episodes.evaluate(cfg, rollout_policy, accelerator).items()
            }
        if log is not None:
            log.log(done, metrics)
        if done % cfg.checkpoint_every == 0 or done == cfg.steps:
            checkpoint_at(done)
        bar.set_postfix(reward=f"{metrics['reward/total']:.3f}", em=f"{metrics['rollout/em']:.2f}")
        bar.update()
    bar.close()

    after = episodes.evaluate(cfg, rollout_policy, accelerator) if cfg.eval_tasks else None
    summary = {
        "steps": cfg.steps,
        "resumed_from": start_step,
        "wall_s": time.perf_counter() - start_time,
        "eval_base": base,
        "eval_before": before,
        "eval_after": after,
        "is_main_process": main,
    }
    if log is not None:
        if after is not None:
            log.log(cfg.steps, {f"eval/{k}": v for k, v in after.items()})
        log.close()
        (run_dir / "summary.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    for env in envs:
        env.close()
    return summary


def _reference_model(model: torch.nn.Module, run_dir: Path, start_step: int) -> torch.nn.Module:
    """The frozen policy GRPO started from, after any warm start, that the KL term anchors to:
    ``model`` itself at step 0, the step-0 checkpoint (never pruned) when resuming later."""
    from searchgym.agents.checkpoint import checkpoint_dir, load_weights

    reference = copy.deepcopy(model).eval().requires_grad_(False)
    if start_step > 0:
        load_weights(checkpoint_dir(run_dir, 0), reference)
    return reference


def _use_bf16(cfg: GRPOConfig) -> bool:
    supported = torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    if cfg.bf16 and not supported:
        raise ConfigError(
            "bf16: true needs a GPU with bfloat16 support; set bf16: null to choose automatically"
        )
    return supported if cfg.bf16 is None else cfg.bf16


def _update(
    wrapped, ref_model, optimizer, samples: Sequence[Sample], cfg: GRPOConfig, accelerator, pad_id: int
):
    """One optimizer step on the whole batch, accumulated over micro-batches; raises
    `TrainingDiverged` (before stepping) if the loss or the gradient is not finite."""
    from searchgym.errors import TrainingDiverged

    totals = torch.tensor(
        [len(samples), sum(sum(s.mask) for s in samples)], dtype=torch.float64, device=accelerator.device
    )
    episodes, tokens = (int(v) for v in accelerator.reduce(totals, reduction="sum"))
    norm = LossNorm(episodes, tokens, cfg.max_turns * cfg.max_new_tokens)
    wrapped.train()
    optimizer.zero_grad(set_to_none=True)
    sums = {"loss": 0.0, "tokens": 0.0, "clipped": 0.0, "kl": 0.0, "ratio": 0.0, "entropy": 0.0}
    chunks = [samples[i : i + cfg.micro_batch_size] for i in range(0, len(samples), cfg.micro_batch_size)]
    for n, chunk in enumerate(chunks):
        batch = {k: v.to(accelerator.device) for k, v in collate(chunk, pad_id).items()}
        sync = contextlib.nullcontext() if n == len(chunks) - 1 else accelerator.no_sync(wrapped)
        with sync, accelerator.autocast():
            inputs = (wrapped, batch["input_ids"], batch["attention_mask"], batch["mask"], cfg.temperature)
            logp, entropy = token_logprobs(*inputs, with_entropy=True)
            ref_logp = None
            if ref_model is not None:
                with torch.no_grad():
                    ref_logp, _ = token_logprobs(ref_model, *inputs[1:])
            loss, stats = policy_loss(
                logp,
                batch["old_logprobs"],
                batch["advantages"],
                batch["mask"],
                norm=norm,
                aggregation=cfg.loss_aggregation,
                clip_low=cfg.clip_low,
                clip_high=cfg.clip_high,
                ref_logp=ref_logp,
                kl_coef=cfg.kl_coef,
            )
            # DDP averages gradients over processes; the norm already covers all of them
            accelerator.backward(loss * accelerator.num_processes)
        sums["loss"] += float(loss.detach())
        sums["entropy"] += float(entropy)
        for key, value in stats.items():
            sums[key] += value
    grad_norm = float(accelerator.clip_grad_norm_(wrapped.parameters(), cfg.max_grad_norm))
    if not (math.isfinite(sums["loss"]) and math.isfinite(grad_norm)):
        optimizer.zero_grad(set_to_none=True)
        raise TrainingDiverged(
            f"the loss ({sums['loss']}) or gradient norm ({grad_norm}) is not finite; the weights were not "
            f"updated and the last good checkpoint in {cfg.run_dir}/checkpoints is intact. Lower lr or "
            f"max_grad_norm and continue with resume: true"
        )
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    n_tokens = max(sums["tokens"], 1.0)
    return {
        "loss/policy": sums["loss"],
        "loss/kl": sums["kl"] / n_tokens,
        "loss/clip_fraction": sums["clipped"] / n_tokens,
        "loss/ratio": sums["ratio"] / n_tokens,
        "loss/entropy": sums["entropy"] / n_tokens,
        "loss/grad_norm": grad_norm,
        "loss/lr": optimizer.param_groups[0]["lr"],
    }


def _mean_over_processes(metrics: dict[str, float], accelerator: Any) -> dict[str, float]:
    if accelerator.num_processes == 1:
        return metrics
    keys = sorted(metrics)
    values = torch.tensor([metrics[k] for k in keys], dtype=torch.float64, device=accelerator.device)
    return dict(zip(keys, accelerator.reduce(values, reduction="mean").tolist()))
