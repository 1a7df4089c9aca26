"""GRPO for multi-turn search agents: one step reads top to bottom in `train`.

One step: take the next ``tasks_per_step`` training tasks and play ``group_size`` sampled episodes
of each (`play.play_step`: all envs batched into one generation call per turn; with dynamic
sampling, groups without signal are replaced by new tasks); score the groups (`rewards.score_groups`:
the env's rubric, plus the trainer's information gain, turned into per-token advantages within
each group); and take one optimizer step (`update.update`) on the clipped policy-gradient loss
over the policy's own tokens. The engine that plays is a `RolloutEngine`: the trainer frees its
caches before the update and lends its keys and values to the information gain without asking
what it is. Which tasks and seeds a step uses is in `schedule`, the config in `config`, the math
in `advantages` and `loss`.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import json
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import torch
from accelerate import Accelerator
from tqdm.auto import tqdm

from searchgym.agents.play.programs import ProgramPlayer, load_program
from searchgym.agents.policies.base import TokenizedPolicy, TrainablePolicy
from searchgym.agents.policies.cached import native_bf16
from searchgym.agents.train.checkpoint import (
    checkpoint_dir,
    latest_checkpoint,
    load_checkpoint,
    load_weights,
    remove_unfinished_saves,
    save_checkpoint,
)
from searchgym.agents.train.config import GRPOConfig
from searchgym.agents.train.engine import load_policies, sync_rollout_weights
from searchgym.agents.train.evaluation import eval_metrics, evaluate, paired_difference
from searchgym.agents.train.freeze import freeze_all_but, top_modules
from searchgym.agents.train.metrics_log import MetricsLog, save_step_episodes
from searchgym.agents.train.play import play_step
from searchgym.agents.train.rewards import Scorer, score_groups
from searchgym.agents.train.schedule import (
    check_splits_apart,
    first_round_size,
    make_env,
    per_process,
    split_warm_start,
    step_lr,
)
from searchgym.agents.train.update import update
from searchgym.agents.train.warm_start import warm_start
from searchgym.envs.contract import check_trainable_env, env_rubric
from searchgym.envs.rubric import Rubric, Term
from searchgym.errors import ConfigError
from searchgym.registry import TRAINER_REWARDS
from searchgym.run_dir import claim_run_dir
from searchgym.tasks.task import Task


def train(cfg: GRPOConfig, on_eval: Callable[[str, dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Train ``cfg.model`` with GRPO on ``cfg.env``; returns the dev metrics as loaded (with a
    warm start: ``eval_base``), before GRPO and after it,
    the steps run, the wall time and its phases' share (``phase_s``: the warm start, each
    evaluation, the GRPO steps run by this call; also written to ``run_dir/summary.json``). Runs as one
    process or under ``accelerate launch`` (data parallel: each process plays its share of the
    step's tasks; gradients are summed across processes). ``on_eval(when, metrics)`` is called in
    the main process as each evaluation ends (``when``: ``base``, ``before``, ``step N``, ``after``).
    Resuming a run that already finished changes nothing and returns its summary (``resumed_from``:
    ``cfg.steps``)."""
    start_time = time.perf_counter()
    run_dir = Path(cfg.run_dir)
    _lock = claim_run_dir(run_dir, resume=cfg.resume, overwrite=cfg.overwrite)  # held until train returns
    accelerator = Accelerator(
        cpu=not torch.cuda.is_available(), mixed_precision="bf16" if _use_bf16(cfg) else "no"
    )
    checkpoint = _resume_point(cfg, accelerator)
    finished = _finished_summary(run_dir, checkpoint, cfg.steps)
    if finished is not None:  # nothing to run: no evaluation, no metrics row, no file changes
        if accelerator.is_main_process:
            tqdm.write(
                f"{run_dir} already finished at step {cfg.steps} (its checkpoint and summary.json are "
                "there): nothing to resume, nothing changed; raise steps to train further"
            )
        return finished | {
            "resumed_from": cfg.steps,
            "is_main_process": accelerator.is_main_process,
            "already_finished": True,
        }
    check_splits_apart(cfg)  # before the model loads
    with contextlib.ExitStack() as closing:  # the envs and the gateway close however train ends
        run = _start(cfg, accelerator, checkpoint, on_eval, closing)
        bar = tqdm(
            total=cfg.steps, initial=run.start_step, desc="GRPO", disable=not (cfg.progress and run.main)
        )
        for step in range(run.start_step, cfg.steps):
            metrics = _step(run, step, bar.set_postfix_str)
            run.phase_s["grpo_steps"] = run.phase_s.get("grpo_steps", 0.0) + metrics["time/step_s"]
            bar.set_postfix(reward=f"{metrics['reward/total']:.3f}", em=f"{metrics['rollout/em']:.2f}")
            bar.update()
        bar.close()
        return _finish(run, start_time)


@dataclasses.dataclass
class _Run:
    """What a run's steps share: made by `_start`, stepped by `_step`, ended by `_finish`."""

    cfg: GRPOConfig
    accelerator: Any
    policy: TrainablePolicy
    engine: TokenizedPolicy
    programs: ProgramPlayer | None
    on_eval: Callable[[str, dict[str, Any]], None] | None
    envs: list[gym.Env] = dataclasses.field(default_factory=list)
    train_tasks: list[Task] = dataclasses.field(default_factory=list)
    rubric: Rubric = Rubric(())
    optimizer: Any = None
    wrapped: Any = None
    """The model as the accelerator prepared it (DDP under ``accelerate launch``)."""
    ref_model: torch.nn.Module | None = None
    log: MetricsLog | None = None
    start_step: int = 0
    base: dict[str, Any] | None = None
    before: dict[str, Any] | None = None
    phase_s: dict[str, float] = dataclasses.field(default_factory=dict)
    """Wall seconds of this process's phases: the warm start, each evaluation, the GRPO steps."""

    @property
    def main(self) -> bool:
        return self.accelerator.is_main_process

    def evaluate(self, when: str) -> dict[str, Any]:
        tick = time.perf_counter()
        metrics = evaluate(self.cfg, self.engine, self.accelerator, self.programs)
        self.phase_s[f"eval_{when.replace(' ', '_')}"] = time.perf_counter() - tick
        if self.on_eval is not None and self.main:
            self.on_eval(when, metrics)
        return metrics

    def checkpoint(self, step: int) -> None:
        if self.main:
            save_checkpoint(
                Path(self.cfg.run_dir),
                step,
                model=self.policy.model,
                optimizer=self.optimizer,
                tokenizer=self.policy.tokenizer,
                data_state={"tasks_seen": step * self.cfg.tasks_per_step},
                extra={"eval_before": self.before, "eval_base": self.base},
                keep=self.cfg.keep_checkpoints,
            )
        self.accelerator.wait_for_everyone()


def _resume_point(cfg: GRPOConfig, accelerator: Any) -> Path | None:
    """The checkpoint ``--resume`` continues from (None for a fresh run); a save that a killed
    run left unfinished is removed first."""
    run_dir = Path(cfg.run_dir)
    if (
        accelerator.is_main_process
    ):  # the run directory is ours and nothing saves yet: a temporary save is dead
        remove_unfinished_saves(run_dir)
    checkpoint = latest_checkpoint(run_dir) if cfg.resume else None  # it warns of each newer one it skips
    if cfg.resume and checkpoint is None:
        raise ConfigError(
            f"--resume: no checkpoint in {run_dir / 'checkpoints'} is complete and intact (the warnings "
            "above say why); start afresh with --overwrite"
        )
    return checkpoint


def _start(
    cfg: GRPOConfig,
    accelerator: Any,
    checkpoint: Path | None,
    on_eval: Callable[[str, dict[str, Any]], None] | None,
    closing: contextlib.ExitStack,
) -> _Run:
    """Everything before the first step: the policies, the gateway of a program, the optimizer,
    the envs, the warm start and the evaluations before GRPO (or the checkpoint resumed), the
    frozen blocks, the KL reference and the metrics log."""
    policy, engine = load_policies(cfg, accelerator.device)
    programs = closing.enter_context(_program_player(cfg, engine)) if cfg.program else None
    run = _Run(cfg, accelerator, policy, engine, programs, on_eval)
    model = policy.model
    trainable = top_modules(model, cfg.trainable_layers) if cfg.trainable_layers else None
    run.optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    run.envs = [
        make_env(cfg, cfg.train_split) for _ in range(first_round_size(cfg, accelerator) * cfg.group_size)
    ]
    for env in run.envs:
        closing.callback(env.close)
    _, run.train_tasks = split_warm_start(list(check_trainable_env(run.envs[0])), cfg)
    run.rubric = training_rubric(run.envs[0], cfg)
    run_dir = Path(cfg.run_dir)
    if run.main:
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "config.json").write_text(json.dumps(dataclasses.asdict(cfg), indent=2), encoding="utf-8")
    if checkpoint is not None:
        state = load_checkpoint(checkpoint, model=model, optimizer=run.optimizer)
        for group in run.optimizer.param_groups:  # the config's, not the saved run's (lr: each step's)
            group["weight_decay"] = cfg.weight_decay
        run.start_step, run.before = state["step"], state["extra"].get("eval_before")
        run.base = state["extra"].get("eval_base")
        sync_rollout_weights(policy, engine)
    else:
        if cfg.warm_start_episodes:
            run.base = run.evaluate("base") if cfg.eval_tasks and cfg.eval_base else None
            tick = time.perf_counter()
            warm_start(cfg, model, policy.tokenizer, accelerator)
            run.phase_s["warm_start"] = time.perf_counter() - tick
            sync_rollout_weights(policy, engine)
        run.before = run.evaluate("before") if cfg.eval_tasks else None
        run.checkpoint(0)
    if trainable:  # after the warm start, which trains every parameter
        freeze_all_but(model, trainable)
    run.wrapped, run.optimizer = accelerator.prepare(
        model, run.optimizer
    )  # after the freeze, which DDP must see
    run.ref_model = _reference_model(model, run_dir, run.start_step) if cfg.kl_coef > 0 else None
    run.log = MetricsLog(run_dir, tensorboard=cfg.tensorboard) if run.main else None
    if run.log is not None:
        run.log.truncate_after(run.start_step)
        if run.before is not None and run.start_step == 0:
            run.log.log(0, eval_metrics(run.before))
    return run


def _step(run: _Run, step: int, show: Callable[[str], None]) -> dict[str, float]:
    """One GRPO step: play, score, update, log; returns the step's metrics (``show`` takes a
    line of progress)."""
    cfg, engine, accelerator = run.cfg, run.engine, run.accelerator
    tick = time.perf_counter()
    groups, played = play_step(engine, run.envs, run.train_tasks, step, cfg, accelerator, show, run.programs)
    if played.get("rollout/short_groups") and run.main:
        note = short_step_note(step + 1, played, cfg, per_process(cfg.tasks_per_step, accelerator))
        tqdm.write(note, file=sys.stderr)  # a diagnostic: stdout holds the results
    scored = time.perf_counter()
    protocol = run.envs[0].unwrapped.protocol
    scorer = Scorer(run.policy.model, run.policy.tokenizer, protocol, engine.cached_kv)
    samples, metrics = score_groups(groups, run.rubric, cfg, scorer)
    engine.drop_caches()  # the update changes the weights they belong to, and needs the memory
    metrics |= played
    updated = time.perf_counter()
    pad_id = run.policy.tokenizer.pad_token_id
    for group in run.optimizer.param_groups:  # the config's, also where a resumed run changed lr
        group["lr"] = step_lr(cfg, step)
    for _ in range(cfg.updates_per_step):
        metrics |= update(run.wrapped, run.ref_model, run.optimizer, samples, cfg, accelerator, pad_id)
    sync_rollout_weights(run.policy, engine)
    metrics = _mean_over_processes(metrics, accelerator)
    now = time.perf_counter()
    metrics |= {  # where a step's time goes; scoring includes the trainer's terms
        "time/rollout_s": scored - tick,
        "time/score_s": updated - scored,
        "time/update_s": now - updated,
        "time/step_s": now - tick,
    }
    done = step + 1
    if cfg.eval_every and done % cfg.eval_every == 0 and done < cfg.steps:
        metrics |= eval_metrics(run.evaluate(f"step {done}"))
    if run.log is not None:
        run.log.log(done, metrics)
        save_step_episodes(cfg.run_dir, done, groups, cfg.log_episodes)
    if done % cfg.checkpoint_every == 0 or done == cfg.steps:
        run.checkpoint(done)
    return metrics


def _finish(run: _Run, start_time: float) -> dict[str, Any]:
    """The evaluation after GRPO (none without a step: the model is the one evaluated before), the
    summary (its wall time counted from ``start_time``, the evaluation included), its file and the
    last metrics row."""
    cfg = run.cfg
    after = run.evaluate("after") if cfg.eval_tasks and cfg.steps else None
    summary = {
        "steps": cfg.steps,
        "resumed_from": run.start_step,
        "wall_s": time.perf_counter() - start_time,
        "phase_s": run.phase_s,
        "eval_base": run.base,
        "eval_before": run.before,
        "eval_after": after,
        "grpo_vs_start": paired_difference(run.before, after, cfg.seed) if run.before and after else None,
        "is_main_process": run.main,
    }
    if run.log is not None:
        if after is not None:
            run.log.log(cfg.steps, eval_metrics(after))
        run.log.close()
        (Path(cfg.run_dir) / "summary.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    return summary


@contextlib.contextmanager
def _program_player(cfg: GRPOConfig, engine: Any) -> Iterator[ProgramPlayer]:
    """``cfg.program`` played through a gateway in front of ``engine``, served on a loopback port
    until the block ends (the HTTP server's modules load only here)."""
    from searchgym.agents.gateway.server import Gateway

    program = load_program(cfg.program)
    with Gateway(engine, cfg.sampling) as gateway:
        yield ProgramPlayer(program, gateway, time_limit_s=cfg.program_time_limit_s)


def training_rubric(env: gym.Env, cfg: GRPOConfig) -> Rubric:
    """The env's rubric (`env_rubric`), with the trainer's terms that ``cfg.rewards`` weighs (a
    term of weight 0 is left out: it would cost a scoring pass for nothing)."""
    trainer = [
        Term(name, float(weight), "trainer", TRAINER_REWARDS.resolve(name))
        for name, weight in cfg.trainer_terms.items()
        if weight
    ]
    return env_rubric(env).plus(*trainer)


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


def _finished_summary(run_dir: Path, checkpoint: Path | None, steps: int) -> dict[str, Any] | None:
    """The ``summary.json`` of a run that already finished ``steps`` steps: resumed from the
    checkpoint of that step, it would only evaluate again and log the final row twice. None if
    the run is not finished (or its summary is of another number of steps)."""
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
    reference = copy.deepcopy(model).eval().requires_grad_(False)
    if start_step > 0:
        load_weights(checkpoint_dir(run_dir, 0), reference)
    return reference


def _use_bf16(cfg: GRPOConfig) -> bool:
    """bfloat16 autocast for the warm start and the update: by default on a GPU that supports
    it; with ``bf16: auto`` also on a CPU with native bfloat16 matmuls (AVX512-BF16, AMX), where
    the main job's warm start took 6.3 min instead of 10.5 and its SFT policy scored the same dev
    EM (0.555, seed 1); CPU runs keep float32 numerics unless asked."""
    supported = native_bf16(torch.device("cuda" if torch.cuda.is_available() else "cpu"))
    if cfg.bf16 is True and not supported:
        raise ConfigError(
            "bf16: true needs a GPU or CPU with native bfloat16 support; set bf16: auto to use it "
            "only where there is"
        )
    if cfg.bf16 == "auto":
        return supported
    return (supported and torch.cuda.is_available()) if cfg.bf16 is None else cfg.bf16


def _mean_over_processes(metrics: dict[str, float], accelerator: Any) -> dict[str, float]:
    if accelerator.num_processes == 1:
        return metrics
    keys = sorted(metrics)
    values = torch.tensor([metrics[k] for k in keys], dtype=torch.float64, device=accelerator.device)
    return dict(zip(keys, accelerator.reduce(values, reduction="mean").tolist()))
