"""Re-scoring a training run's saved episodes under another rubric, without a model
(``searchgym rescore RUN_DIR --set "rewards={...}"``).

Each saved rollout episode (``RUN_DIR/episodes/step-*.jsonl``) is replayed in the run's env made
with the new reward weights: its task is reset and its actions stepped again, so every step and
episode term is measured by the env itself, exactly as training would have measured it (a replay
whose observations differ from the saved ones, as a search engine that an LLM simulates would
give, is an error). The trainer's terms read the policy, so they are not computed again: the
values the episodes saved (``reward_components``) are weighed anew, and a term the episodes did
not save is an error before anything runs.

Then each group is ranked again: where a step saved every episode of a group (``log_episodes`` at
least ``tasks_per_step`` x ``group_size``), the advantages the old and the new rewards give, and
those each term alone would give. Written to OUT (a run directory `searchgym view` opens beside the
old one): ``config.json`` (the run's, with the new rewards), ``episodes/step-*.jsonl`` (rescored),
``metrics.jsonl`` (each step's ``reward/*`` means over the saved episodes) and ``rescore.json``
(per step the old and new means and, over complete groups, how the ranking moved).
"""

from __future__ import annotations

import dataclasses
import json
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from statistics import fmean
from typing import Any

import gymnasium as gym
import torch
from tqdm.auto import tqdm

from searchgym.agents.play.episode import Episode
from searchgym.agents.train.advantages import degenerate_groups, group_advantages
from searchgym.agents.train.config import GRPOConfig, load_run_config
from searchgym.agents.train.grpo import training_rubric
from searchgym.agents.train.metrics_log import EPISODES_DIR, METRICS_FILE, read_metrics
from searchgym.agents.train.rewards import trained_rewards
from searchgym.agents.train.schedule import make_env
from searchgym.envs.rubric import Rubric, Term
from searchgym.errors import ConfigError, DataNotFoundError, SearchGymError
from searchgym.files import replace_atomically

CHANGEABLE = ("rewards", "advantage")
"""The config keys a rescore may change: the rubric, and how groups are ranked."""


@dataclasses.dataclass(frozen=True)
class Saved:
    """One saved rollout episode: its step, its group (the task's index in the step) and itself."""

    step: int
    group: int
    episode: Episode


def read_saved(run_dir: Path) -> list[Saved]:
    """Every saved rollout episode of the run, step by step."""
    files = sorted((run_dir / EPISODES_DIR).glob("step-*.jsonl"))
    if not files:
        raise DataNotFoundError(
            f"{run_dir / EPISODES_DIR} holds no saved episodes: train with log_episodes > 0 "
            "(every episode of a step: tasks_per_step x group_size) to rescore a run"
        )
    saved = []
    for path in files:
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                step, group = row.pop("step"), row.pop("group")
                saved.append(Saved(step, group, Episode.from_dict(row)))
    return saved


def check_rescorable(
    old: GRPOConfig, new: GRPOConfig, saved: Sequence[Saved], trainer: Sequence[str]
) -> None:
    """A `ConfigError`, before any episode is replayed, where the rescore cannot be exact: a
    change to another key than `CHANGEABLE`, or a ``trainer`` term that the episodes did not save."""
    changed = [f.name for f in dataclasses.fields(GRPOConfig) if getattr(old, f.name) != getattr(new, f.name)]
    others = [name for name in changed if name not in CHANGEABLE]
    if others:
        raise ConfigError(
            f"rescore replays the run's episodes in its env: it changes {' and '.join(CHANGEABLE)} only, "
            f"not {', '.join(others)}"
        )
    for name in trainer:
        missing = sum(name not in s.episode.reward_components for s in saved)
        if missing:
            raise ConfigError(
                f"{name} is a trainer term, which reads the policy: rescore reweighs the values the "
                f"episodes saved, and {missing} of the {len(saved)} saved episodes have none (the run "
                f"did not weigh {name}); leave it out of rewards.terms"
            )


def replay(env: gym.Env, task: Any, episode: Episode, trainer_terms: Sequence[str]) -> Episode:
    """``episode``'s actions stepped again in ``env`` from ``task``: a new episode whose step and
    episode terms ``env`` measured, and whose turns keep the trainer terms' saved values."""
    _, info = env.reset(options={"task": task})
    again = Episode.of(task)
    for t, turn in enumerate(episode.turns):
        observation, reward, terminated, truncated, info = env.step(turn.action)
        if observation != turn.observation:
            raise SearchGymError(
                f"episode {episode.task_id}, turn {t}: the env showed another observation than the saved "
                "one, so its episodes do not replay (a search engine an LLM simulates, or a changed "
                "corpus); rescore needs an env that answers the same action the same way"
            )
        again.record(turn.action, observation, reward, terminated, truncated, info)
    for name in trainer_terms:
        for old, new in zip(episode.turns, again.turns):
            if name in old.reward_components:
                new.reward_components[name] = old.reward_components[name]
        again.reward_components[name] = episode.reward_components[name]
    return again


def rescore(
    run_dir: str | Path, overrides: Sequence[str], out: str | Path | None = None, *, progress: bool = True
) -> dict[str, Any]:
    """Rescore the run in ``run_dir`` with its config changed by ``overrides`` (``--set``
    syntax, `CHANGEABLE` keys only); writes OUT (default ``RUN_DIR/rescore``) and returns what
    ``rescore.json`` holds. ``progress`` shows a bar over the episodes replayed."""
    run_dir = Path(run_dir)
    old, new = load_run_config(run_dir), load_run_config(run_dir, overrides)
    saved = read_saved(run_dir)
    out = Path(out) if out is not None else run_dir / "rescore"
    with make_env(new, new.train_split) as env:
        rubric, old_trainer = training_rubric(env, new), training_rubric(env, old).at("trainer")
        trainer = [t.name for t in rubric.at("trainer")]
        check_rescorable(old, new, saved, trainer)
        tasks = {task.id: task for task in env.unwrapped.tasks}
        unknown = sorted({s.episode.task_id for s in saved} - set(tasks))
        if unknown:
            raise ConfigError(
                f"{len(unknown)} saved episodes play tasks the env does not have (e.g. {unknown[0]!r})"
            )
        rescored = [
            Saved(s.step, s.group, replay(env, tasks[s.episode.task_id], s.episode, trainer))
            for s in tqdm(saved, desc="rescore", unit="episode", disable=not progress)
        ]
    logged = {row["step"]: row for row in read_metrics(run_dir) if "reward/total" in row}
    steps = sorted({s.step for s in saved})
    report = {
        "run_dir": str(run_dir),
        "old_rewards": old.rewards,
        "new_rewards": new.rewards,
        "advantage": new.advantage,
        "steps": [
            _step_report(step, saved, rescored, old_trainer, rubric, new, logged.get(step)) for step in steps
        ],
    }
    _write(out, new, rescored, report)
    return report


def _step_report(
    step: int,
    saved: Sequence[Saved],
    rescored: Sequence[Saved],
    old_trainer: Sequence[Term],
    rubric: Rubric,
    new: GRPOConfig,
    logged: dict[str, Any] | None,
) -> dict[str, Any]:
    """One step: the mean reward of its saved episodes before and after (``reward_logged``: what
    training logged, over every episode it trained on), each term's mean after, and over its
    complete groups the informative ones before and after, the share of episode pairs whose
    order changed (ties included), and each group's advantages (old, new, and each term's alone)."""
    before, after = _groups(saved, step), _groups(rescored, step)
    row: dict[str, Any] = {
        "step": step,
        "episodes": sum(len(g) for g in before.values()),
        "reward_old": _mean(_rewards(before, old_trainer, new.advantage)),
        "reward_new": _mean(_rewards(after, rubric.at("trainer"), new.advantage)),
        "reward_logged": None if logged is None else logged["reward/total"],
        "terms_new": _term_means([ep for group in after.values() for ep in group]),
    }
    complete = [g for g, episodes in before.items() if len(episodes) == new.group_size]
    row["complete_groups"] = len(complete)
    if not complete:
        return row
    scale = new.advantage != "dr_grpo"
    a = _rewards({g: before[g] for g in complete}, old_trainer, new.advantage)
    b = _rewards({g: after[g] for g in complete}, rubric.at("trainer"), new.advantage)
    flips = [
        _sign(ra[i] - ra[j]) != _sign(rb[i] - rb[j])
        for ra, rb in zip(a.tolist(), b.tolist())
        for i in range(len(ra))
        for j in range(i + 1, len(ra))
    ]
    weights = {name: w for name, w in rubric.weights(("step", "episode", "trainer")).items() if w}

    def alone(name: str, episodes: list[Episode]) -> list[float]:
        values = torch.tensor([[weights[name] * ep.reward_components.get(name, 0.0) for ep in episodes]])
        return group_advantages(values, scale=scale)[0].tolist()

    return row | {
        "informative_old": int((~degenerate_groups(a)).sum()),
        "informative_new": int((~degenerate_groups(b)).sum()),
        "pairs_flipped": fmean(flips),
        "groups": [
            {
                "group": g,
                "advantage_old": adv_old,
                "advantage_new": adv_new,
                "by_term": {name: alone(name, after[g]) for name in weights},
            }
            for g, adv_old, adv_new in zip(
                complete, group_advantages(a, scale=scale).tolist(), group_advantages(b, scale=scale).tolist()
            )
        ],
    }


def _groups(saved: Sequence[Saved], step: int) -> dict[int, list[Episode]]:
    groups: dict[int, list[Episode]] = defaultdict(list)
    for s in saved:
        if s.step == step:
            groups[s.group].append(s.episode)
    return dict(sorted(groups.items()))


def _rewards(groups: dict[int, list[Episode]], trainer: Sequence[Term], advantage: str) -> torch.Tensor:
    """Each episode's reward as the trainer summed it (`trained_rewards`) with the ``trainer``
    terms' saved values; groups of unequal sizes (some of their episodes not saved) as one row."""
    rows = (
        list(groups.values()) if len({len(g) for g in groups.values()}) == 1 else [sum(groups.values(), [])]
    )
    values = [
        (t.weight, t.name, [[ep.reward_components[t.name]] for row in rows for ep in row]) for t in trainer
    ]
    return trained_rewards(rows, values, advantage)


def _mean(rewards: torch.Tensor) -> float:
    return float(rewards.mean())


def _term_means(episodes: Sequence[Episode]) -> dict[str, float]:
    names = dict.fromkeys(name for ep in episodes for name in ep.reward_components)
    return {name: fmean(ep.reward_components.get(name, 0.0) for ep in episodes) for name in names}


def _sign(x: float) -> int:
    return (x > 1e-12) - (x < -1e-12)


def _write(out: Path, cfg: GRPOConfig, rescored: Sequence[Saved], report: dict[str, Any]) -> None:
    (out / EPISODES_DIR).mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(dataclasses.asdict(cfg), indent=2), encoding="utf-8")
    by_step: dict[int, list[Saved]] = defaultdict(list)
    for s in rescored:
        by_step[s.step].append(s)
    for step, rows in by_step.items():
        with replace_atomically(out / EPISODES_DIR / f"step-{step:06d}.jsonl") as f:
            for s in rows:
                f.write(json.dumps({**s.episode.to_dict(), "step": s.step, "group": s.group}) + "\n")
    with replace_atomically(out / METRICS_FILE) as f:
        for row in report["steps"]:
            metrics = {
                "reward/total": row["reward_new"],
                **{f"reward/{k}": v for k, v in row["terms_new"].items()},
            }
            f.write(json.dumps({"step": row["step"], **metrics}) + "\n")
    (out / "rescore.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
