"""Episodes: what an agent did in an env, turn by turn, as every player records it
(`Episode.record`); one episode's figures (`episode_figures`), their means over episodes
(`episode_metrics`, `summarize`), and episodes saved as JSONL."""

from __future__ import annotations

import json
import os
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from statistics import fmean
from typing import Any

from searchgym.stats import bootstrap_ci
from searchgym.tasks.task import Task


@dataclass
class Turn:
    """One step of an episode, as the env reported it (fields after ``error`` default, so that
    files written before they existed still load)."""

    action: str
    observation: str
    reward: float
    tool: str | None
    error: str | None
    reward_components: dict[str, float] = field(default_factory=dict)
    obs_tokens: int = 0
    """Tokens of this step's observation that a tool produced (0 for an invalid step)."""
    query: str | None = None
    doc_ids: list[str] | None = None
    """Ids of the documents a search showed."""


def _turn(row: dict[str, Any]) -> Turn:
    """A turn as saved; a file written before the trainer's terms joined ``reward_components``
    holds the information gain as its own field."""
    row = dict(row)
    gain = row.pop("info_gain", None)
    if gain is not None:
        row["reward_components"] = {**row.get("reward_components", {}), "info_gain": gain}
    return Turn(**row)


@dataclass
class Episode:
    task_id: str
    question: str
    answers: list[str]
    metadata: dict[str, Any]
    turns: list[Turn] = field(default_factory=list)
    prediction: str | None = None
    em: float = 0.0
    f1: float = 0.0
    cover_em: float = 0.0
    evidence_recall: float | None = None
    n_searches: int = 0
    n_invalid: int = 0
    n_errors: int = 0
    obs_tokens: int = 0
    total_reward: float = 0.0
    reward_components: dict[str, float] = field(default_factory=dict)
    terminated: bool = False
    truncated: bool = False
    evidence: list[str] = field(default_factory=list)
    """Ids of the task's gold evidence documents."""
    error: str | None = None
    """What ended an agent program's episode besides the env: it raised, ran past its time limit,
    never answered, or sent malformed requests (`searchgym.agents.play.programs`)."""
    failure: str | None = None
    """Why it failed (`searchgym.agents.play.failures.failure_kind`), where an evaluation that
    saved it said; None for an episode that answered right, or one no evaluation judged."""
    # the tokens of a policy-backed agent's episode, for training; not saved with the episode
    trajectory: Any = field(default=None, repr=False, compare=False)
    streams: Any = field(default=None, repr=False, compare=False)
    """An agent program's token streams (`searchgym.agents.gateway.records.token_streams`), in
    place of ``trajectory``; not saved with the episode."""

    @property
    def n_turns(self) -> int:
        return len(self.turns)

    def to_dict(self) -> dict[str, Any]:
        row = asdict(self)
        del row["trajectory"], row["streams"]
        return row

    @classmethod
    def from_dict(cls, row: dict[str, Any]) -> Episode:
        row = dict(row)
        row["turns"] = [_turn(t) for t in row["turns"]]
        return cls(**row)

    @classmethod
    def of(cls, task: Task) -> Episode:
        """A new, empty episode of ``task``."""
        return cls(
            task.id, task.question, list(task.answers), dict(task.metadata), evidence=list(task.evidence)
        )

    def record(
        self,
        action: str,
        observation: str,
        reward: float,
        terminated: bool,
        truncated: bool,
        info: dict[str, Any],
    ) -> None:
        """Add the step that ``action`` played (what ``env.step`` returned, a `StepInfo`): its turn,
        the summed reward and components, the counters and, at the answer, its scores. Every
        adapter that plays an env for another trainer records its episodes with this too."""
        self.turns.append(
            Turn(
                action,
                observation,
                float(reward),
                info["tool"],
                info["error"],
                reward_components=dict(info["reward_components"]),
                obs_tokens=info.get("step_obs_tokens", 0),
                query=info.get("query"),
                doc_ids=info.get("doc_ids"),
            )
        )
        self.total_reward += float(reward)
        for name, value in info["reward_components"].items():
            self.reward_components[name] = self.reward_components.get(name, 0.0) + value
        for name in ("n_searches", "n_invalid", "n_errors", "obs_tokens"):
            setattr(self, name, info[name])
        if "prediction" in info:
            self.prediction = info["prediction"]
            self.em, self.f1, self.cover_em = info["em"], info["f1"], info["cover_em"]
            self.evidence_recall = info["evidence_recall"]
        self.terminated, self.truncated = bool(terminated), bool(truncated)


def episode_figures(episode: Episode) -> dict[str, float]:
    """One episode's figures, the single place they are computed: ``em``, ``f1``, ``cover_em``
    (0 when it never answered), ``searches``, ``turns``, ``invalid`` (invalid turns),
    ``truncated``, ``errors`` (1 when it ended with an error: ``Episode.error``, an agent
    program's failure), ``tool_errors`` (steps whose tool failed), ``obs_tokens`` (tokens the
    tools returned), ``return`` (the summed reward) and each reward term's sum as
    ``reward/<name>``. Averaged over episodes they are ``searchgym eval``'s (`episode_metrics`);
    the adapters report them per episode."""
    return {
        "em": episode.em,
        "f1": episode.f1,
        "cover_em": episode.cover_em,
        "searches": float(episode.n_searches),
        "turns": float(episode.n_turns),
        "invalid": float(episode.n_invalid),
        "truncated": float(episode.truncated),
        "errors": float(episode.error is not None),
        "tool_errors": float(episode.n_errors),
        "obs_tokens": float(episode.obs_tokens),
        "return": episode.total_reward,
        **{f"reward/{name}": value for name, value in episode.reward_components.items()},
    }


def episode_metrics(episodes: Sequence[Episode]) -> dict[str, float]:
    """The means every report of episodes shows, from `episode_figures`: EM, F1, searches,
    turns, the share of turns that were invalid (``invalid_rate``), and the shares of episodes
    that were truncated and that ended with an error."""
    figures = [episode_figures(ep) for ep in episodes]

    def mean(name: str) -> float:
        return fmean(f[name] for f in figures)

    return {
        "em": mean("em"),
        "f1": mean("f1"),
        "searches": mean("searches"),
        "turns": mean("turns"),
        "invalid_rate": sum(f["invalid"] for f in figures) / max(sum(f["turns"] for f in figures), 1),
        "truncated": mean("truncated"),
        "errors": mean("errors"),
    }


_ERROR_FIXES = (
    ("ran past its time limit", "give each episode more time: eval --time-limit SECONDS, or the config key "
     "program_time_limit_s in train"),
    ("ran past its wall-clock limit", "the episode took 10 times its time limit, waits included (a loaded "
     "machine, or a hung generation): raise --time-limit (program_time_limit_s in train)"),
    ("the program raised", "fix the program: each episode's error holds the exception (searchgym view the "
     "run, or read the episodes' JSONL)"),
    ("returned no answer", "make the program return its answer text, or call tools.answer before it returns"),
    ("the program returned a", "make the program return its answer as a string (or None after tools.answer)"),
)  # fmt: skip


_NUMBER_RE = re.compile(r"\d+(?:\.\d+)?")


def error_warning(errors: Sequence[str | None]) -> str | None:
    """A one-line warning when episodes ended with an error (one ``Episode.error`` per episode,
    None for none): how many, the most common error and how to fix it; None if none did, so
    that an evaluation whose episodes all failed never reads as a plain score of zero.

    >>> line = error_warning([None, "the program raised KeyError: 3", "the program raised KeyError: 7"])
    >>> line.split("; ")[0]
    'warning: 2 of 3 episodes ended with an error, scored as the env left them'
    >>> line.split("; ")[1].split(" -> ")[0]
    'most common (2): the program raised KeyError: 3'
    >>> error_warning([None, None]) is None
    True
    """
    failed = [e for e in errors if e is not None]
    if not failed:
        return None
    kinds = Counter(_NUMBER_RE.sub("N", e) for e in failed)  # "waited 3.2 s" and "waited 4 s" alike
    kind, count = kinds.most_common(1)[0]
    common = next(e for e in failed if _NUMBER_RE.sub("N", e) == kind)
    fix = next((fix for cue, fix in _ERROR_FIXES if cue in common), "see each episode's error in the run")
    return (
        f"warning: {len(failed)} of {len(errors)} episodes ended with an error, scored as the env left them; "
        f"most common ({count}): {common[:300]} -> {fix}"
    )


def summarize(episodes: Sequence[Episode]) -> dict[str, float]:
    """`episode_metrics` with cover EM, evidence recall and the mean return, and the 95 %
    bootstrap interval of EM and F1 over the episodes' tasks (``em_low``, ``em_high``,
    ``f1_low``, ``f1_high``)."""
    if not episodes:
        raise ValueError("no episodes to summarize")
    recalls = [ep.evidence_recall for ep in episodes if ep.evidence_recall is not None]
    em_low, em_high = bootstrap_ci([ep.em for ep in episodes])
    f1_low, f1_high = bootstrap_ci([ep.f1 for ep in episodes])
    means = episode_metrics(episodes)
    return {
        "n": len(episodes),
        "em": means.pop("em"),
        "em_low": em_low,
        "em_high": em_high,
        "f1_low": f1_low,
        "f1_high": f1_high,
        "f1": means.pop("f1"),
        "cover_em": fmean(ep.cover_em for ep in episodes),
        **means,
        "evidence_recall": fmean(recalls) if recalls else float("nan"),
        "return": fmean(ep.total_reward for ep in episodes),
    }


def summarize_by(episodes: Sequence[Episode], key: str) -> dict[Any, dict[str, float]]:
    """`summarize` per value of ``metadata[key]`` (episodes without the key are left out)."""
    groups: dict[Any, list[Episode]] = defaultdict(list)
    for ep in episodes:
        if key in ep.metadata:
            groups[ep.metadata[key]].append(ep)
    return {value: summarize(groups[value]) for value in sorted(groups)}


def save_episodes(episodes: Iterable[Episode], path: str | os.PathLike) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for ep in episodes:
            f.write(json.dumps(ep.to_dict(), ensure_ascii=False) + "\n")


def load_episodes(path: str | os.PathLike) -> list[Episode]:
    with Path(path).open(encoding="utf-8") as f:
        return [Episode.from_dict(json.loads(line)) for line in f if line.strip()]
