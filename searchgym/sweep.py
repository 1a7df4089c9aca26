"""`searchgym sweep`: accuracy against cost over several cost weights, and the Pareto front.

AI-SearchPlanner trades a planner's answer utility against its planning cost with a weight λ and
sweeps λ to trace the front. Here λ is the cost of one search (``rewards.per_search``):

- evaluation (`evaluate_sweep`): every agent plays the same tasks once, with no search cost.
  The env charges a search cost linearly, so an agent's mean reward at λ is exactly its mean
  reward at 0 minus λ times its mean searches (searches of exactly right answers only, with
  ``cost_only_if_correct``): one evaluation scores every λ, and the best agent at each λ is read
  off without playing again.
- training (`train_sweep`): one GRPO run per λ (`searchgym.agents.train.grpo.train` with
  ``rewards.per_search = λ``, in ``OUT/lambda-<λ>``); each trained policy is then evaluated as
  above, so the front compares the policies that different weights produced.

Both write ``sweep.json`` (per agent: accuracy = EM, F1, mean searches and turns, mean reward at
λ = 0, whether it is on the front; per λ: the best agent and its reward), the episodes of each
agent, and ``pareto.png`` (`searchgym.plots.plot_pareto`).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from searchgym.agents import make_agent, run_episodes, save_episodes, summarize
from searchgym.agents.policies.base import SamplingParams
from searchgym.agents.train.config import load_config
from searchgym.envs.registry import make
from searchgym.errors import ConfigError
from searchgym.files import file_name
from searchgym.plots import plot_pareto

DEFAULT_ENV = "searchgym/FictionalQA-Planner-v0"
DEFAULT_AGENTS = (
    "planner-0",
    "planner-1",
    "planner-2",
    "planner-3",
    "planner-4",
    "planner-question",
    "oracle",
)


@dataclass(frozen=True)
class Point:
    """One agent's evaluation: the means over its episodes."""

    accuracy: float
    """Exact match."""
    f1: float
    searches: float
    """Searches per episode: the cost λ weighs."""
    turns: float
    base_reward: float
    """Reward per episode with no search cost (λ = 0)."""
    cost_units: float
    """Searches charged per episode: all of them, or with ``cost_only_if_correct`` only those of
    exactly right answers. Reward at λ = ``base_reward - λ * cost_units``."""
    n: int

    def reward_at(self, weight: float) -> float:
        return self.base_reward - weight * self.cost_units


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of the ``(cost, accuracy)`` points that no other point dominates (costs no more
    and is at least as accurate, one of the two strictly), by increasing cost. Equal points are
    all kept.

    >>> pareto_front([(0.0, 0.1), (1.0, 0.5), (2.0, 0.4), (3.0, 0.9), (1.0, 0.3), (3.0, 0.9)])
    [0, 1, 3, 5]
    """
    front = []
    for i, (cost, accuracy) in enumerate(points):
        if not any(c <= cost and a >= accuracy and (c < cost or a > accuracy) for c, a in points):
            front.append(i)
    return sorted(front, key=lambda i: (points[i][0], -points[i][1], i))


def best_at(points: dict[str, Point], weight: float) -> str:
    """The agent with the most reward at cost weight ``weight``; ties go to the cheaper one,
    then to the first given.

    >>> pts = {"a": Point(0.5, 0.5, 1.0, 2.0, 0.5, 1.0, 10), "b": Point(0.9, 0.9, 3.0, 4.0, 0.9, 3.0, 10)}
    >>> best_at(pts, 0.0), best_at(pts, 0.5)
    ('b', 'a')
    """
    order = list(points)
    return max(order, key=lambda n: (points[n].reward_at(weight), -points[n].cost_units, -order.index(n)))


def parse_weights(text: str) -> list[float]:
    """``"0,0.05,0.1"`` -> ``[0.0, 0.05, 0.1]``; weights are costs, so not negative.

    >>> parse_weights("0, 0.05,0.1")
    [0.0, 0.05, 0.1]
    """
    try:
        weights = [float(w) for w in text.split(",") if w.strip()]
    except ValueError:
        raise ConfigError(
            f"--weights takes numbers separated by commas, e.g. 0,0.05,0.1; got {text!r}"
        ) from None
    if not weights or any(not np.isfinite(w) or w < 0 for w in weights):
        raise ConfigError(f"--weights needs at least one weight, each finite and >= 0; got {text!r}")
    return sorted(set(weights))


def summarize_sweep(points: dict[str, Point], weights: Sequence[float]) -> dict[str, Any]:
    """What ``sweep.json`` holds besides the run's settings: ``agents`` (each point, and whether
    it is on the front), ``front`` (names, by increasing cost) and ``weights`` (per λ the best
    agent, its reward and every agent's reward)."""
    names = list(points)
    front = [names[i] for i in pareto_front([(points[n].searches, points[n].accuracy) for n in names])]
    agents = {n: {**dataclasses.asdict(p), "pareto": n in front} for n, p in points.items()}
    per_weight = []
    for weight in weights:
        best = best_at(points, weight)
        rewards = {n: p.reward_at(weight) for n, p in points.items()}
        per_weight.append({"lambda": weight, "best": best, "reward": rewards[best], "rewards": rewards})
    return {"agents": agents, "front": front, "weights": per_weight}


def write_outputs(report: dict[str, Any], out: Path, title: str) -> Path:
    """``OUT/sweep.json`` and ``OUT/pareto.png`` (its path goes in ``report["plot"]``); returns
    the PNG's path."""
    out.mkdir(parents=True, exist_ok=True)
    report["plot"] = str(out / "pareto.png")
    (out / "sweep.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    picks: dict[str, list[float]] = {}
    for row in report["weights"]:
        picks.setdefault(row["best"], []).append(row["lambda"])
    points = {n: (a["searches"], a["accuracy"]) for n, a in report["agents"].items()}
    return plot_pareto(points, report["front"], picks, out / "pareto.png", title=title)


def format_table(report: dict[str, Any]) -> str:
    """The agents (accuracy, cost, on the front or not), then the best agent per λ."""
    rows = [["agent", "EM", "F1", "searches", "turns", "front"]]
    for name, a in report["agents"].items():
        rows.append(
            [
                name,
                f"{a['accuracy']:.3f}",
                f"{a['f1']:.3f}",
                f"{a['searches']:.2f}",
                f"{a['turns']:.2f}",
                "*" if a["pareto"] else "",
            ]
        )
    rows += [["λ", "best", "reward", "", "", ""]]
    rows += [[f"{w['lambda']:g}", w["best"], f"{w['reward']:.3f}", "", "", ""] for w in report["weights"]]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(x.rjust(w) if i else x.ljust(w) for i, (x, w) in enumerate(zip(r, widths))) for r in rows
    ]
    return "\n".join(line.rstrip() for line in lines)


def evaluate_agents(
    env_id: str,
    agent_names: Sequence[str],
    *,
    n: int,
    seed: int = 0,
    n_envs: int = 4,
    env_kwargs: dict[str, Any] | None = None,
    params: Any = None,
    out: Path | None = None,
    on_episode: Callable[[str], None] | None = None,
) -> tuple[dict[str, Point], int]:
    """Every agent on the same ``n`` tasks of ``env_id`` (drawn with ``seed``), with no search
    cost; returns the points and the number of tasks. Episodes go to ``OUT/<agent>.jsonl``."""
    if n < 1:
        raise ConfigError(f"--n must be at least 1, got {n}")
    if not agent_names:
        raise ConfigError("name at least one agent")
    kwargs = dict(env_kwargs or {})
    for name in agent_names:
        make_agent(name, seed=seed, params=params)  # fail on a typo before any work
    probe = make(env_id, **kwargs)
    all_tasks = getattr(probe.unwrapped, "tasks", None)
    weights = getattr(probe.unwrapped, "rewards", None)
    probe.close()
    if not all_tasks:
        raise ConfigError(f"{env_id} exposes no `tasks`; a sweep needs a task set")
    if getattr(weights, "per_search", None) != 0:
        raise ConfigError(
            f"a sweep sets the search cost (λ) itself: it needs an env whose reward weights "
            f"(env.unwrapped.rewards) charge nothing per search; {env_id} has {weights!r}"
        )
    only_if_correct = weights.cost_only_if_correct
    count = min(n, len(all_tasks))
    picks = np.random.default_rng(seed).choice(len(all_tasks), size=count, replace=False)
    tasks = [all_tasks[int(i)] for i in sorted(picks)]
    points = {}
    for name in agent_names:
        episodes = run_episodes(
            lambda: make(env_id, **kwargs),
            functools.partial(make_agent, name, seed=seed, params=params),
            tasks,
            n_envs=n_envs,
            seed=seed,
            on_episode=(lambda _, name=name: on_episode(name)) if on_episode else None,
        )
        if out is not None:
            save_episodes(episodes, out / f"{file_name(name)}.jsonl")
        metrics = summarize(episodes)
        charged = [ep.n_searches * (ep.em == 1.0 or not only_if_correct) for ep in episodes]
        points[name] = Point(
            accuracy=metrics["em"],
            f1=metrics["f1"],
            searches=metrics["searches"],
            turns=metrics["turns"],
            base_reward=metrics["return"],
            cost_units=float(np.mean(charged)),
            n=count,
        )
    return points, count


def evaluate_sweep(
    env_id: str,
    agent_names: Sequence[str],
    weights: Sequence[float],
    out: str | os.PathLike,
    *,
    n: int = 100,
    seed: int = 0,
    n_envs: int = 4,
    env_kwargs: dict[str, Any] | None = None,
    params: Any = None,
    on_episode: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Evaluate each agent once and score it at every weight (see the module docstring); writes
    ``OUT/sweep.json``, ``OUT/pareto.png`` and the episodes; returns the report."""
    out = Path(out)
    points, count = evaluate_agents(
        env_id,
        agent_names,
        n=n,
        seed=seed,
        n_envs=n_envs,
        env_kwargs=env_kwargs,
        params=params,
        out=out,
        on_episode=on_episode,
    )
    settings = {"mode": "evaluate", "env": env_id, "env_kwargs": _jsonable(env_kwargs or {})}
    report = {**settings, "n": count, "seed": seed, "cost": "per_search", **summarize_sweep(points, weights)}
    write_outputs(report, out, f"{env_id} · {count} tasks")
    return report


def train_sweep(
    config: str | os.PathLike | None,
    weights: Sequence[float],
    *,
    overrides: Sequence[str] = (),
    out: str | os.PathLike | None = None,
    n: int = 100,
    n_envs: int = 4,
    progress: bool = True,
    on_episode: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """One GRPO run per weight (``rewards.per_search`` = λ, ``run_dir`` = ``OUT/lambda-<λ>``;
    OUT defaults to the config's ``run_dir``), then each trained policy evaluated greedily on the
    same ``n`` tasks of the config's env and eval split; writes and returns the report as
    `evaluate_sweep` does, with each agent's ``trained_at`` weight and run directory."""
    # lazy: both import torch (1.3 s), which only a training sweep needs
    from searchgym.agents.train.checkpoint import latest_checkpoint
    from searchgym.agents.train.grpo import train

    base = load_config(config, [*overrides, *([] if progress else ["progress=false"])])
    out = Path(out) if out is not None else Path(base.run_dir)
    env_kwargs = {
        "split": base.eval_split,
        "max_turns": base.max_turns,
        **base.env_kwargs,
        **base.eval_env_kwargs,
    }  # as GRPO evaluates
    if base.env_rewards:
        env_kwargs["rewards"] = {k: v for k, v in base.env_rewards.items() if k != "per_search"}
    params = SamplingParams(max_new_tokens=base.max_new_tokens, temperature=0.0)
    points: dict[str, Point] = {}
    runs: dict[str, dict[str, Any]] = {}
    count = 0
    for weight in weights:
        run_dir = out / f"lambda-{weight:g}"
        cfg = dataclasses.replace(base, run_dir=str(run_dir), rewards={**base.rewards, "per_search": weight})
        train(cfg)
        checkpoint = latest_checkpoint(run_dir)
        if checkpoint is None:
            raise ConfigError(f"training at λ = {weight:g} left no checkpoint in {run_dir}")
        name = f"λ={weight:g}"
        agent = f"hf:{checkpoint}"
        found, count = evaluate_agents(
            cfg.env,
            [agent],
            n=n,
            seed=cfg.seed,
            n_envs=n_envs,
            env_kwargs=env_kwargs,
            params=params,
            out=run_dir / "sweep-eval",
            on_episode=(lambda _, name=name: on_episode(name)) if on_episode else None,
        )
        points[name] = found[agent]
        runs[name] = {"trained_at": weight, "run_dir": str(run_dir), "checkpoint": str(checkpoint)}
    report = {
        "mode": "train",
        "env": base.env,
        "env_kwargs": _jsonable(env_kwargs),
        "config": str(config) if config is not None else None,
        "n": count,
        "seed": base.seed,
        "cost": "per_search",
        **summarize_sweep(points, weights),
    }
    for name, run in runs.items():
        report["agents"][name].update(run)
    write_outputs(report, out, f"{base.env} · GRPO at each λ · {count} tasks")
    return report


def _jsonable(obj: Any) -> Any:
    """Settings as JSON: objects (a generator) by their type name."""
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if obj is None or isinstance(obj, (str, int, float, bool)):
        return obj
    return type(obj).__name__
