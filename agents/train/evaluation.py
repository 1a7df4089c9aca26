"""Greedy evaluation of the policy GRPO trains, on the first ``eval_tasks`` tasks of the eval
split, and the paired comparison of two evaluations (``cfg`` is a `GRPOConfig`)."""

from __future__ import annotations

from typing import Any

from accelerate.utils import gather_object

from searchgym.agents.play.episode import error_warning
from searchgym.agents.play.failures import card, failure_kind, shown_at
from searchgym.agents.play.programs import ProgramPlayer
from searchgym.agents.play.rollout import episode_progress, run_episodes
from searchgym.agents.policies.agent import PolicyAgent
from searchgym.agents.policies.base import SamplingParams, TokenizedPolicy
from searchgym.agents.train.config import GRPOConfig
from searchgym.agents.train.schedule import make_env
from searchgym.errors import ConfigError
from searchgym.stats import bootstrap_ci, paired_bootstrap_ci


def evaluate(
    cfg: GRPOConfig, policy: TokenizedPolicy, accelerator: Any = None, programs: ProgramPlayer | None = None
) -> dict[str, Any]:
    """Greedy episodes on the first ``cfg.eval_tasks`` tasks of the eval split (shared out over
    processes), played by the policy or by an agent program (``programs``); mean EM (with its
    95 % bootstrap interval, ``em_low``/``em_high``), F1, searches, turns, invalid-action rate and
    the share of episodes that ended with an error, ``em_per_task`` (in task order) for paired
    comparisons, ``failures`` (the retrieval card: `searchgym.agents.play.failures.card`), and
    ``warning``: `error_warning`'s line, or None."""
    env = make_env(cfg, cfg.eval_split)
    tasks = list(env.unwrapped.tasks)[: cfg.eval_tasks]
    env.close()
    if not tasks:
        raise ConfigError(
            f"nothing to evaluate: eval_tasks is {cfg.eval_tasks} and the {cfg.eval_split!r} split has "
            f"{len(env.unwrapped.tasks)} tasks; set eval_tasks to 1 or more (0 skips `train`'s evaluations)"
        )
    rank, world = (accelerator.process_index, accelerator.num_processes) if accelerator else (0, 1)
    mine = tasks[rank::world]
    params = SamplingParams(max_new_tokens=cfg.max_new_tokens, temperature=0.0)
    show = cfg.progress and rank == 0
    progress = episode_progress(len(mine), f"{cfg.eval_split} eval", disable=not show)
    n_envs = min(len(mine), policy.max_batch_size or len(mine))
    with policy.float_weights(), progress as callbacks:  # not the CPU engine's int8 copy
        if programs is not None:
            envs = [make_env(cfg, cfg.eval_split) for _ in range(n_envs)]
            episodes = programs.play(envs, mine, params, cfg.seed, on_episode=callbacks["on_episode"])
            for env in envs:
                env.close()
        else:
            episodes = run_episodes(
                lambda: make_env(cfg, cfg.eval_split),
                lambda: PolicyAgent(policy, params),
                mine,
                # a policy that decodes in batches of max_batch_size (HF, the CPU engine) gets that
                # many episodes at a time: more would only queue, and would outgrow the CPU engine's
                # cache of each episode's keys and values, which then re-reads whole episodes every turn
                n_envs=n_envs,
                seed=cfg.seed,
                **callbacks,
            )
    policy.drop_caches()
    rows = [
        (
            rank + world * i,
            e.em,
            e.f1,
            e.n_searches,
            e.n_turns,
            e.n_invalid,
            e.error,
            failure_kind(e),
            shown_at(e),
        )
        for i, e in enumerate(episodes)
    ]
    if world > 1:
        rows = gather_object(rows)
    rows.sort(key=lambda row: row[0])
    n = len(rows)
    _, em, f1, searches, turns, invalid, errors, kinds, shown = (list(column) for column in zip(*rows))
    em_low, em_high = bootstrap_ci(em, seed=cfg.seed)
    return {
        "n": n,
        "em": sum(em) / n,
        "em_low": em_low,
        "em_high": em_high,
        "f1": sum(f1) / n,
        "searches": sum(searches) / n,
        "turns": sum(turns) / n,
        "invalid_rate": sum(invalid) / max(sum(turns), 1),
        "errors": sum(e is not None for e in errors) / n,
        "em_per_task": em,
        "failures": card(kinds, [s for s in shown if s], seed=cfg.seed),
        "warning": error_warning(errors),
    }


def paired_difference(before: dict[str, Any], after: dict[str, Any], seed: int = 0) -> dict[str, float]:
    """``after``'s EM minus ``before``'s on the same tasks (two `evaluate` results), with the 95 %
    paired-bootstrap interval of the difference."""
    low, high = paired_bootstrap_ci(before["em_per_task"], after["em_per_task"], seed=seed)
    return {"em_diff": after["em"] - before["em"], "em_diff_low": low, "em_diff_high": high}


def eval_metrics(result: dict[str, Any]) -> dict[str, float]:
    """An `evaluate` result as ``eval/*`` scalars for the metrics log: its means, and the share of
    the episodes of each failure kind (``eval/failure/KIND``) and of gold passages shown."""
    scalars = {f"eval/{k}": v for k, v in result.items() if k not in ("em_per_task", "warning", "failures")}
    failures = result.get("failures")
    if failures:
        n = max(failures["n"], 1)
        scalars |= {f"eval/failure/{kind}": v["count"] / n for kind, v in failures["kinds"].items()}
        if failures["gold_shown"] is not None:
            scalars["eval/gold_shown"] = failures["gold_shown"]
    return scalars
