"""Filtering, sorting and summing up episodes: pure functions over the columns of a table of
episode summaries (numpy arrays, one entry per episode; NaN where an episode has no value; the
boolean column ``ok`` False on a line that is skipped as malformed, which no query keeps).

`Query` is what the episodes list asks for; the browser sends it as URL parameters and the
static export runs the same filters in JavaScript (``static/data.js``), so the names here and
there must agree.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from searchgym.errors import ConfigError
from searchgym.failure_kinds import KINDS
from searchgym.stats import bootstrap_ci

SORTABLE = ("index", "em", "f1", "searches", "invalid", "errors", "reward", "turns", "tokens", "hops", "step")
_TRISTATE = ("any", "none", "some")
MAX_LIMIT = 500


@dataclass(frozen=True)
class Query:
    """One page of the episodes list; every field has a URL parameter of the same name."""

    runs: tuple[int, ...] = ()
    """Run indices to keep (none: every run)."""
    sources: tuple[int, ...] = ()
    """Agents or training steps (source indices) to keep (none: all)."""
    hops: tuple[int, ...] = ()
    outcome: str = "any"
    """``any``, ``solved`` (EM 1) or ``failed``."""
    invalid: str = "any"
    """``any``, ``none`` (no invalid action) or ``some``."""
    errors: str = "any"
    failure: str = "any"
    """``any``, or a failure kind (`searchgym.agents.play.failures.KINDS`): the failed episodes an
    evaluation judged so."""
    min_searches: float | None = None
    max_searches: float | None = None
    min_reward: float | None = None
    max_reward: float | None = None
    min_step: int | None = None
    max_step: int | None = None
    text: str = ""
    """Case-insensitive substring of the question or task id."""
    sort: str = "index"
    desc: bool = False
    offset: int = 0
    limit: int = 50

    def __post_init__(self) -> None:
        if self.outcome not in ("any", "solved", "failed"):
            raise ConfigError(f"outcome must be any, solved or failed; got {self.outcome!r}")
        if self.failure != "any" and self.failure not in KINDS:
            raise ConfigError(f"failure must be any or one of {', '.join(KINDS)}; got {self.failure!r}")
        for name in ("invalid", "errors"):
            if getattr(self, name) not in _TRISTATE:
                raise ConfigError(f"{name} must be any, none or some; got {getattr(self, name)!r}")
        if self.sort not in SORTABLE:
            raise ConfigError(f"sort must be one of {', '.join(SORTABLE)}; got {self.sort!r}")
        if self.offset < 0 or not 1 <= self.limit <= MAX_LIMIT:
            raise ConfigError(
                f"offset must be >= 0 and limit 1..{MAX_LIMIT}; got {self.offset}, {self.limit}"
            )

    @classmethod
    def from_params(cls, params: Mapping[str, str]) -> Query:
        """From URL parameters (``hops=2,3&sort=em&desc=1``); an unknown one is an error."""
        fields = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(params) - set(fields))
        if unknown:
            raise ConfigError(f"unknown parameter(s) {unknown}; known: {', '.join(fields)}")
        values: dict[str, Any] = {}
        for name, text in params.items():
            if text == "":
                continue
            kind = str(fields[name].type)
            try:
                if kind.startswith("tuple"):
                    values[name] = tuple(int(x) for x in text.split(",") if x != "")
                elif kind == "bool":
                    values[name] = text.lower() in ("1", "true", "yes")
                elif kind.startswith("float"):
                    values[name] = float(text)
                elif kind.startswith("int"):
                    values[name] = int(text)
                else:
                    values[name] = text
            except ValueError:
                raise ConfigError(f"parameter {name}={text!r} is not a {kind}") from None
        return cls(**values)


def select(cols: Mapping[str, np.ndarray], texts: list[str], q: Query) -> np.ndarray:
    """Indices of the episodes ``q`` keeps, in its order (``index``: file order, ties in order)."""
    n = len(cols["em"])
    keep = cols["ok"].copy()
    for name, column in (("runs", "run"), ("sources", "source"), ("hops", "hops")):
        if getattr(q, name):
            keep &= np.isin(cols[column], getattr(q, name))
    if q.outcome != "any":
        keep &= (cols["em"] >= 1.0) if q.outcome == "solved" else ~(cols["em"] >= 1.0)
    if q.failure != "any":
        keep &= cols["failure"] == KINDS.index(q.failure)
    for name in ("invalid", "errors"):
        mode = getattr(q, name)
        if mode != "any":
            keep &= (cols[name] > 0) if mode == "some" else ~(cols[name] > 0)
    for lo, hi, column in (
        (q.min_searches, q.max_searches, "searches"),
        (q.min_reward, q.max_reward, "reward"),
        (q.min_step, q.max_step, "step"),
    ):
        if lo is not None:
            keep &= cols[column] >= lo
        if hi is not None:
            keep &= cols[column] <= hi
    if q.text:
        needle = q.text.lower()
        keep &= np.fromiter((needle in t for t in texts), dtype=bool, count=n)
    rows = np.flatnonzero(keep)
    if q.sort != "index":
        values = cols[q.sort][rows]
        values = np.where(np.isnan(values), np.inf, values)  # missing values last either way
        order = np.argsort(-values if q.desc else values, kind="stable")
        missing = np.isinf(values[order])
        rows = np.concatenate([rows[order][~missing], rows[order][missing]])
    elif q.desc:
        rows = rows[::-1]
    return rows


def summarize(cols: Mapping[str, np.ndarray], rows: np.ndarray) -> dict[str, float | None]:
    """Means over episodes ``rows``: n, EM and its 95 % bootstrap interval, F1, searches, turns,
    invalid rate (invalid actions per turn), errors, reward, observation tokens."""
    if rows.size == 0:
        return {"n": 0}
    em = cols["em"][rows]
    scored = em[np.isfinite(em)]
    low, high = bootstrap_ci(scored) if scored.size else (None, None)
    turns = np.nansum(cols["turns"][rows])
    return {
        "n": int(rows.size),
        "em": _mean(em),
        "em_low": low,
        "em_high": high,
        "f1": _mean(cols["f1"][rows]),
        "searches": _mean(cols["searches"][rows]),
        "turns": _mean(cols["turns"][rows]),
        "invalid_rate": float(np.nansum(cols["invalid"][rows]) / max(turns, 1)),
        "errors": _mean(cols["errors"][rows]),
        "reward": _mean(cols["reward"][rows]),
        "tokens": _mean(cols["tokens"][rows]),
    }


def _mean(values: np.ndarray) -> float | None:
    finite = values[np.isfinite(values)]
    return float(finite.mean()) if finite.size else None


def group_summaries(cols: Mapping[str, np.ndarray], rows: np.ndarray, key: str) -> list[dict[str, Any]]:
    """`summarize` per value of column ``key`` among ``rows`` (e.g. per arm, per step), by value."""
    out = []
    values = cols[key][rows]
    for value in np.unique(values[np.isfinite(values)]):
        out.append({key: _number(value), **summarize(cols, rows[values == value])})
    return out


def _number(x: float) -> int | float:
    return int(x) if float(x).is_integer() else float(x)
