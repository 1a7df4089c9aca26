"""GRPO for multi-turn search agents: one step reads top to bottom in `train`.

One step: take the next ``tasks_per_step`` training tasks, play ``group_size`` sampled episodes of
each (all envs batched into one generation call per turn; with dynamic sampling, groups without
signal are replaced by new tasks: `episodes.play_step`), score them
(`score_groups`: the env's reward terms, plus information gain, turned into per-token advantages
within each group), and take one optimizer step (`update`) on the clipped policy-gradient loss
over the policy's own tokens (observation, template and self-search information tokens have mask
0 and get no gradient). The importance ratio compares the current policy with the log-probs the
sampler recorded. The config is in `config`, the math in `advantages` and `loss`.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import json
import math
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from searchgym.agents.policies.kv import with_cache
from searchgym.agents.train import episodes
from searchgym.agents.train.advantages import (
    degenerate_groups,
    group_advantages,
    igpo_advantages,
    stratified_advantages,
)
from searchgym.agents.train.config import GRPOConfig
from searchgym.agents.train.loss import LossNorm, Sample, collate, policy_loss, token_logprobs
from searchgym.agents.train.metrics_log import MetricsLog, save_step_episodes
from searchgym.agents.train.shared_prompt import SharedPrompt, by_prompt
from searchgym.envs.contract import check_trainable_env
from searchgym.errors import ConfigError
from searchgym.run_dir import claim_run_dir


def train(cfg: GRPOConfig, on_eval: Callable[[str, dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Train ``cfg.model`` with GRPO on ``cfg.env``; returns the dev metrics as loaded (with a
    warm start: ``eval_base``), before GRPO and after it,
    the steps run and the wall time (also written to ``run_dir/summary.json``). Runs as one
    process or under ``accelerate launch`` (data parallel: each process plays its share of the
    step's tasks; gradients are summed across processes). ``on_eval(when, metrics)`` is called in
    the main process as each evaluation ends (``when``: ``base``, ``before``, ``step N``, ``after``).
    Resuming a run that already finished changes nothing and returns its summary (``resumed_from``:
    ``cfg.steps``)."""
    from accelerate import Accelerator
    from tqdm.auto import tqdm

    from searchgym.agents.train.checkpoint import latest_checkpoint, load_checkpoint, save_checkpoint
    from searchgym.agents.train.freeze import freeze_all_but, top_modules

    start_time = time.perf_counter()
    run_dir = Path(cfg.run_dir)
    _lock = claim_run_dir(run_dir, resume=cfg.resume, overwrite=cfg.overwrite)  # held until train returns
    accelerator = Accelerator(
        cpu=not torch.cuda.is_available(), mixed_precision="bf16" if _use_bf16(cfg) else "no"
    )
    main = accelerator.is_main_process
    checkpoint = latest_checkpoint(run_dir) if cfg.resume else None  # it warns of each newer one it skips
    if cfg.resume and checkpoint is None:
        raise ConfigError(
            f"--resume: no checkpoint in {run_dir / 'checkpoints'} is complete and intact (the warnings "
            "above say why); start afresh with --overwrite"
        )
    finished = _finished_summary(run_dir, checkpoint, cfg.steps)
    if finished is not None:  # nothing to run: no evaluation, no metrics row, no file changes
        if main:
            tqdm.write(
                f"{run_dir} already finished at step {cfg.steps} (its checkpoint and summary.json are "
                "there): nothing to resume, nothing changed; raise steps to train further"
            )
        return finished | {"resumed_from": cfg.steps, "is_main_process": main, "already_finished": True}

    def evaluate(when: str) -> dict[str, Any]:
        metrics = episodes.evaluate(cfg, rollout_policy, accelerator)
        if on_eval is not None and main:
            on_eval(when, metrics)
        return metrics

    episodes.check_splits_apart(cfg)  # before the model loads
    policy, rollout_policy = episodes.load_policies(cfg, accelerator.device)
    model, tokenizer = policy.model, policy.tokenizer
    trainable = top_modules(model, cfg.trainable_layers) if cfg.trainable_layers else None
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    envs = [
        episodes.make_env(cfg, cfg.train_split)
        for _ in range(episodes.first_round_size(cfg, accelerator) * cfg.group_size)
    ]
    _, train_tasks = episodes.split_warm_start(list(check_trainable_env(envs[0])), cfg)
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
    if checkpoint is not None:
        state = load_checkpoint(checkpoint, model=model, optimizer=optimizer)
        start_step, before = state["step"], state["extra"].get("eval_before")
        base = state["extra"].get("eval_base")
        episodes.sync_rollout_weights(rollout_policy, model)
    else:
        if cfg.warm_start_episodes:
            base = evaluate("base") if cfg.eval_tasks and cfg.eval_base else None
            episodes.warm_start(cfg, model, tokenizer, accelerator)
            episodes.sync_rollout_weights(rollout_policy, model)
        before = evaluate("before") if cfg.eval_tasks else None
        checkpoint_at(0)
    if trainable:  # after the warm start, which trains every parameter
        freeze_all_but(model, trainable)
    wrapped, optimizer = accelerator.prepare(model, optimizer)  # after the freeze, which DDP must see
    ref_model = _reference_model(model, run_dir, start_step) if cfg.kl_coef > 0 else None

    log = MetricsLog(run_dir, tensorboard=cfg.tensorboard) if main else None
    if log is not None:
        log.truncate_after(start_step)
        if before is not None and start_step == 0:
            log.log(0, eval_metrics(before))
    bar = tqdm(total=cfg.steps, initial=start_step, desc="GRPO", disable=not (cfg.progress and main))
    protocol = envs[0].unwrapped.protocol
    cached_kv = getattr(rollout_policy, "cached_kv", None)  # the CPU engine's, for the information gain
    for step in range(start_step, cfg.steps):
        tick = time.perf_counter()
        groups, played = episodes.play_step(
            rollout_policy, envs, train_tasks, step, cfg, accelerator, status=bar.set_postfix_str
        )
        if played.get("rollout/short_groups") and main:
            note = short_step_note(
                step + 1, played, cfg, episodes.per_process(cfg.tasks_per_step, accelerator)
            )
            tqdm.write(note, file=sys.stderr)  # a diagnostic: stdout holds the results
        scored = time.perf_counter()
        samples, metrics = score_groups(groups, cfg, model, tokenizer, protocol, cached_kv)
        episodes.drop_caches(rollout_policy)  # the update changes the weights they belong to
        metrics |= played
        updated = time.perf_counter()
        for _ in range(cfg.updates_per_step):
            metrics |= update(
                wrapped, ref_model, optimizer, samples, cfg, accelerator, tokenizer.pad_token_id
            )
        episodes.sync_rollout_weights(rollout_policy, model)
        metrics = _mean_over_processes(metrics, accelerator)
        now = time.perf_counter()
        metrics |= {  # where a step's time goes; scoring includes the information gain
            "time/rollout_s": scored - tick,
            "time/score_s": updated - scored,
            "time/update_s": now - updated,
            "time/step_s": now - tick,
        }
        done = step + 1
        if cfg.eval_every and done % cfg.eval_every == 0 and done < cfg.steps:
            metrics |= eval_metrics(evaluate(f"step {done}"))
        if log is not None:
            log.log(done, metrics)
            save_step_episodes(run_dir, done, groups, cfg.log_episodes)
        if done % cfg.checkpoint_every == 0 or done == cfg.steps:
            checkpoint_at(done)
        bar.set_postfix(reward=f"{metrics['reward/total']:.3f}", em=f"{metrics['rollout/em']:.2f}")
        bar.update()
    bar.close()

    # with no GRPO step (a warm start alone), the model is the one evaluated before
    after = evaluate("after") if cfg.eval_tasks and cfg.steps else None
    summary = {
        "steps": cfg.steps,
        "resumed_from": start_step,
        "wall_s": time.perf_counter() - start_time,
        "eval_base": base,
        "eval_before": before,
        "eval_after": after,
        "grpo_vs_start": episodes.paired_difference(before, after, cfg.seed) if before and after else None,
        "is_main_process": main,
    }
    if log is not None:
        if after is not None:
            log.log(cfg.steps, eval_metrics(after))
        log.close()
        (run_dir / "summary.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    for env in envs:
        env.close()
    return summary


def short_step_note(step: int, played: dict[str, float], cfg: GRPOConfig, wanted: int) -> str:
    """What dynamic sampling dropped in a step that did not find the ``wanted`` informative groups
    (this process's share of ``tasks_per_step``) within its refill rounds and time."""
    n_played, short = int(played["rollout/groups_played"]), int(played["rollout/short_groups"])
    dropped = round(played["rollout/degenerate_groups"] * n_played)
    found = wanted - short
    trains = f"trains on {found}" if found else "trains on the step's own groups, which carry no gradient"
    return (
        f"step {step}: dynamic sampling dropped {dropped} of {n_played} groups (all rewards equal) and "
        f"found {found} of {wanted} informative groups within max_refill_rounds "
        f"{cfg.max_refill_rounds} / max_refill_seconds {cfg.max_refill_seconds}; it {trains}"
    )


def score_groups(
    groups: list[list[Any]], cfg: GRPOConfig, model: Any, tokenizer: Any, protocol: Any, cached_kv: Any = None
):
    """Rewards, advantages and the loss samples of a step's episodes, with the rollout metrics;
    ``cached_kv``: the rollout engine's keys and values, if it kept them (see `information_gains`)."""
    flat = [ep for group in groups for ep in group]
    rewards = torch.tensor([[ep.total_reward for ep in group] for group in groups], dtype=torch.float64)
    gains = information_gains(flat, model, tokenizer, protocol, cached_kv) if cfg.info_gain_weight else None
    for ep, episode_gains in zip(flat, gains or []):
        for turn, gain in zip(ep.turns, episode_gains):
            turn.info_gain = gain  # shown per turn by searchgym view
    if gains is not None and cfg.advantage != "igpo":
        rewards = rewards + cfg.info_gain_weight * torch.tensor([sum(g) for g in gains]).view_as(rewards)
    if cfg.advantage == "igpo":
        turn_rewards, i = [], 0
        for group in groups:
            turn_rewards.append(
                [
                    [cfg.info_gain_weight * g for g in gains[i + j]] + [ep.total_reward]
                    for j, ep in enumerate(group)
                ]
            )
            i += len(group)
        per_turn = [a for group in igpo_advantages(turn_rewards, gamma=cfg.igpo_gamma) for a in group]
    else:
        if cfg.advantage == "stratified":
            strata = torch.tensor([[ep.n_searches for ep in group] for group in groups])
            adv = stratified_advantages(rewards, strata, alpha=cfg.stratified_alpha)
        else:
            adv = group_advantages(rewards, scale=cfg.advantage == "grpo")
        per_turn = [[float(a)] * max(ep.n_turns, 1) for a, ep in zip(adv.flatten(), flat)]
    samples = [to_sample(ep.trajectory, turn_adv) for ep, turn_adv in zip(flat, per_turn)]
    names = sorted({name for ep in flat for name in ep.reward_components})  # the env's terms, users' too
    components = {name: [ep.reward_components.get(name, 0.0) for ep in flat] for name in names}
    metrics = {
        "reward/total": float(rewards.mean()),
        **{f"reward/{name}": mean(values) for name, values in components.items()},
        "rollout/em": mean([ep.em for ep in flat]),
        "rollout/f1": mean([ep.f1 for ep in flat]),
        "rollout/searches": mean([ep.n_searches for ep in flat]),
        "rollout/turns": mean([ep.n_turns for ep in flat]),
        "rollout/invalid_rate": sum(ep.n_invalid for ep in flat) / max(sum(ep.n_turns for ep in flat), 1),
        "rollout/truncated": mean([ep.truncated for ep in flat]),
        "rollout/response_tokens": mean([sum(s.mask) for s in samples]),
        "rollout/degenerate_trained": float(degenerate_groups(rewards).double().mean()),
    }
    if gains is not None:
        metrics["reward/info_gain"] = mean([sum(g) for g in gains])
    return samples, metrics


def mean(values: Sequence[float]) -> float:
    return float(sum(values) / len(values)) if values else 0.0


def information_gains(
    episodes: Sequence[Any], model: Any, tokenizer: Any, protocol: Any, cached_kv: Any = None
) -> list[list[float]]:
    """Per episode, the information gain of each turn but the last (IGPO): the rise of the
    policy's teacher-forced probability of the gold answer once that turn's result is shown.
    With ``cached_kv`` (the CPU engine's, which still holds the episodes it just played, computed
    with these weights) an episode's tokens are not read again; only each turn's probe is."""
    from searchgym.agents.train.info_gain import (
        answer_tokens,
        batch_turn_answer_probabilities,
        information_gain,
    )

    answers = [answer_tokens(tokenizer, protocol, ep.answers[0]) for ep in episodes]
    trajectories = [ep.trajectory for ep in episodes]
    probabilities = batch_turn_answer_probabilities(model, trajectories, answers, cached_kv)
    return [information_gain(p) for p in probabilities]


def to_sample(trajectory: Any, turn_advantages: Sequence[float]) -> Sample:
    """The loss sample of one episode: every token of turn t gets that turn's advantage."""
    advantages = [0.0] * len(trajectory.ids)
    starts = list(trajectory.turn_starts) + [len(trajectory.ids)]
    for t, value in enumerate(turn_advantages[: len(trajectory.turn_ends)]):
        for i in range(starts[t], starts[t + 1]):
            advantages[i] = value
    return Sample(
        trajectory.prompt_ids + trajectory.ids,
        len(trajectory.prompt_ids),
        list(trajectory.mask),
        list(trajectory.logprobs),
        advantages,
    )


def eval_metrics(result: dict[str, Any]) -> dict[str, float]:
    """An `episodes.evaluate` result as ``eval/*`` scalars for the metrics log."""
    return {f"eval/{k}": v for k, v in result.items() if k != "em_per_task"}


def _finished_summary(run_dir: Path, checkpoint: Path | None, steps: int) -> dict[str, Any] | None:
    """The ``summary.json`` of a run that already finished ``steps`` steps: resumed from the
    checkpoint of that step, it would only evaluate again and log the final row twice. None if
    the run is not finished (or its summary is of another number of steps)."""
    from searchgym.agents.train.checkpoint import checkpoint_dir

    if checkpoint is None or checkpoint != checkpoint_dir(run_dir, steps):
        return None
    try:
        summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):  # none, or cut short: the final evaluation runs again
        return None
    return summary if isinstance(summary, dict) and summary.get("steps") == steps else None


def _reference_model(model: torch.nn.Module, run_dir: Path, start_step: int) -> torch.nn.Module:
    """The frozen policy GRPO started from, after any warm start, that the KL term anchors to:
    ``model`` itself at step 0, the step-0 checkpoint (never pruned) when resuming later."""
    from searchgym.agents.train.checkpoint import checkpoint_dir, load_weights

    reference = copy.deepcopy(model).eval().requires_grad_(False)
    if start_step > 0:
        load_weights(checkpoint_dir(run_dir, 0), reference)
    return reference


def _use_bf16(cfg: GRPOConfig) -> bool:
    """bfloat16 autocast for the warm start and the update: by default on a GPU that supports
    it; with ``bf16: auto`` also on a CPU with native bfloat16 matmuls (AVX512-BF16, AMX), where
    the main job's warm start took 6.3 min instead of 10.5 and its SFT policy scored the same dev
    EM (0.555, seed 1); CPU runs keep float32 numerics unless asked."""
    from searchgym.agents.policies.cached import native_bf16

    supported = native_bf16(torch.device("cuda" if torch.cuda.is_available() else "cpu"))
    if cfg.bf16 is True and not supported:
        raise ConfigError(
            "bf16: true needs a GPU or CPU with native bfloat16 support; set bf16: auto to use it "
            "only where there is"
        )
    if cfg.bf16 == "auto":
        return supported
    return (supported and torch.cuda.is_available()) if cfg.bf16 is None else cfg.bf16


def update(
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
    sums = {"loss": 0.0, "tokens": 0.0, "clipped": 0.0, "kl": 0.0, "ratio": 0.0, "tis": 0.0, "entropy": 0.0}
    share = cfg.share_prompts and ref_model is None and accelerator.num_processes == 1
    parts = by_prompt(samples) if share else [((), list(samples))]
    for prompt, part in parts:
        shared = SharedPrompt(wrapped, prompt, accelerator) if prompt else None
        for start in range(0, len(part), cfg.micro_batch_size):
            chunk = part[start : start + cfg.micro_batch_size]
            batch = {k: v.to(accelerator.device) for k, v in collate(chunk, pad_id).items()}
            last = part is parts[-1][1] and start + len(chunk) == len(part)
            sync = contextlib.nullcontext() if last else accelerator.no_sync(wrapped)
            with sync, accelerator.autocast():
                attention, extra = batch["attention_mask"], {}
                if shared is not None:
                    attention = torch.cat([attention.new_ones(len(chunk), len(prompt)), attention], 1)
                    extra = with_cache(wrapped, shared.cache(len(chunk)))
                inputs = (wrapped, batch["input_ids"], attention, batch["mask"], cfg.temperature)
                logp, entropy = token_logprobs(*inputs, with_entropy=True, **extra)
                ref_logp = None
                if ref_model is not None:
                    with torch.no_grad():
                        ref_logp, _ = token_logprobs(ref_model, *inputs[1:])
                old_logp, sampler_logp = batch["old_logprobs"], None
                # a guide's tokens (GRPOConfig.guide) were not sampled: the model's own stand in
                old_logp = torch.where(old_logp.isnan(), logp.detach(), old_logp)
                if cfg.tis_cap:  # the one update of the step: the model's log-probs are the old ones
                    old_logp, sampler_logp = logp.detach(), old_logp
                loss, stats = policy_loss(
                    logp,
                    old_logp,
                    batch["advantages"],
                    batch["mask"],
                    norm=norm,
                    aggregation=cfg.loss_aggregation,
                    clip_low=cfg.clip_low,
                    clip_high=cfg.clip_high,
                    ref_logp=ref_logp,
                    kl_coef=cfg.kl_coef,
                    sampler_logp=sampler_logp,
                    tis_cap=cfg.tis_cap,
                )
                # DDP averages gradients over processes; the norm already covers all of them
                accelerator.backward(loss * accelerator.num_processes)
            sums["loss"] += float(loss.detach())
            sums["entropy"] += float(entropy)
            for key, value in stats.items():
                sums[key] += value
        if shared is not None:
            shared.backward()
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
        "loss/tis_weight": sums["tis"] / n_tokens,
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
