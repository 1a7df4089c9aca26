"""All the episodes the viewer shows: one table over every source of every run.

Opening indexes the byte offsets of each file's lines (`LineIndex`) and nothing more. The
summaries the list filters and sorts on are read on first use, once, in one pass per file that
checks every line (`LineIndex.summaries`), into numpy columns; an episode is read again only
when a page shows it. Episodes are numbered by line, so a malformed line keeps its number but
is in no list, summary or comparison; the table says what it skipped (`skipped`), and a file
that cannot be read at all opens with no episodes.

A table is not changed once built: the table of runs read again (new training steps) is a new
one, built with the old (``previous``), which lends it every file that has not changed, read
as far as it was, and keeps their episodes' and sources' numbers: new files come after.
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from searchgym.errors import ConfigError
from searchgym.failure_kinds import KINDS
from searchgym.viewer.jsonl import NUMBERS, LineIndex, Malformed, Summaries, summarize
from searchgym.viewer.query import Query, group_summaries, select
from searchgym.viewer.runs import Run, Skipped, Source, env_label

_COLUMNS = {  # column -> summary number
    "em": "em",
    "f1": "f1",
    "searches": "n_searches",
    "invalid": "n_invalid",
    "errors": "n_errors",
    "reward": "total_reward",
    "turns": "n_turns",
    "tokens": "obs_tokens",
    "hops": "hops",
    "step": "step",
    "group": "group",
    "failure": "failure",
}


_QUICK_ROWS = 1000
"""The first (or last) rows of the plain list are read line by line, before the summaries."""


class SourceFile:
    """A source's file as it was when opened: its lines (`LineIndex`) and, read on first use,
    their summaries (`LineIndex.summaries`, with a training step's number filled in). A file
    that cannot be read has no lines and says why (`problem`)."""

    def __init__(self, path: Path, step: int | None) -> None:
        self.step = step
        self.problem: str | None = None
        try:
            st = os.stat(path)  # before reading: a change while it is read shows in the next stamp
            if not stat.S_ISREG(st.st_mode):
                raise OSError(0, "not a regular file")
            self.stamp = (st.st_size, st.st_mtime_ns)
            self.index = LineIndex(path)
        except OSError as e:
            self.stamp = (-1, 0)
            self.index = LineIndex.empty(path)
            self.problem = f"cannot be read ({e.strerror or e})"
        self._lock = threading.Lock()
        self._summaries: Summaries | None = None

    def unchanged(self) -> bool:
        """Whether the file still has the size and modification time it had when opened."""
        try:
            st = os.stat(self.index.path)
        except OSError:
            return False
        return (st.st_size, st.st_mtime_ns) == self.stamp

    def summaries(self) -> Summaries:
        with self._lock:
            if self._summaries is None:
                try:
                    if self.problem is not None:
                        raise OSError(self.problem)
                    summaries = self.index.summaries()
                except OSError as e:  # unreadable when opened, or gone since
                    self.problem = self.problem or f"cannot be read ({e.strerror or e})"
                    summaries = Summaries.unread(len(self.index))
                if self.step is not None:  # rows written without "step" are the file's step
                    step = summaries.numbers[:, NUMBERS.index("step")]
                    step[np.isnan(step) & summaries.ok] = self.step
                self._summaries = summaries
            return self._summaries

    def read(self) -> bool:
        """Whether its summaries have been read."""
        return self._summaries is not None

    def skipped(self, run: int) -> Skipped | None:
        """What of it was skipped (after `summaries`, its malformed lines too), or None."""
        if self.problem is not None:
            return Skipped(run, self.index.path, None, (self.problem,))
        found = self._summaries
        if found is None or not found.malformed:
            return None
        return Skipped(run, self.index.path, found.malformed, found.reasons)


class EpisodeTable:
    """Episodes of ``runs``, numbered from 0 in order of run, source and line; with a
    ``previous`` table (of the same runs, read earlier), its sources keep their numbers and
    new ones come after them."""

    def __init__(self, runs: Sequence[Run], *, previous: EpisodeTable | None = None) -> None:
        self.runs = list(runs)
        sources = [s for run in self.runs for s in run.sources]
        kept: dict[Path, SourceFile] = {}
        if previous is not None:
            place = {s.path: i for i, s in enumerate(previous.sources)}
            sources.sort(key=lambda s: place.get(s.path, len(place)))  # stable: new ones in run order
            kept = {s.path: f for s, f in zip(previous.sources, previous.files) if f.unchanged()}
        self.sources: list[Source] = sources
        self.files = [kept.get(s.path) or SourceFile(s.path, s.step) for s in sources]
        self.indexes = [f.index for f in self.files]
        sizes = np.array([len(ix) for ix in self.indexes], dtype=np.int64)
        self.first = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self.arms = _arms(self.runs, self.sources)
        self._lock = threading.Lock()
        self._cols: dict[str, np.ndarray] | None = None
        self._text: list[str] = []
        self._brief: list[dict[str, Any]] = []

    def __len__(self) -> int:
        return int(self.first[-1])

    def locate(self, gid: int) -> tuple[int, int]:
        """(source index, line) of episode ``gid``."""
        if not 0 <= gid < len(self):
            raise ConfigError(f"there is no episode {gid}; episodes are numbered 0..{len(self) - 1}")
        source = int(np.searchsorted(self.first, gid, side="right") - 1)
        return source, gid - int(self.first[source])

    def episode(self, gid: int) -> dict[str, Any]:
        """Episode ``gid`` as saved, with ``id``, ``source`` and ``run`` added; a sentence
        (`ConfigError`) if its line is malformed or its file cannot be read."""
        source, line = self.locate(gid)
        index = self.indexes[source]
        try:
            row = json_safe(index.row(line))
        except Malformed as e:
            raise ConfigError(
                f"episode {gid} is line {index.line_number(line)} of {index.path}, which is skipped: {e}"
            ) from None
        except OSError as e:
            raise ConfigError(f"episode {gid} cannot be read from {index.path} ({e.strerror or e})") from None
        return {**row, "id": gid, "source": source, "run": self.sources[source].run}

    @property
    def columns(self) -> dict[str, np.ndarray]:
        """The summary columns (read on first use): those of ``_COLUMNS`` plus run, source, arm."""
        with self._lock:
            if self._cols is None:
                self._cols = self._read_columns()
            return self._cols

    @property
    def briefs(self) -> list[dict[str, Any]]:
        """Per episode its task id, question, prediction and answers (read with the columns)."""
        _ = self.columns
        return self._brief

    def _read_columns(self) -> dict[str, np.ndarray]:
        blocks, ok = [], []
        for file in self.files:
            found = file.summaries()
            blocks.append(found.numbers)
            ok.append(found.ok)
            self._brief.extend(found.briefs)
        table = np.concatenate(blocks) if blocks else np.zeros((0, len(NUMBERS)))
        cols = {name: table[:, NUMBERS.index(key)].copy() for name, key in _COLUMNS.items()}
        source_of = np.repeat(np.arange(len(self.sources)), np.diff(self.first))
        cols["source"] = source_of.astype(float)
        cols["run"] = np.array([s.run for s in self.sources], dtype=float)[source_of]
        cols["arm"] = np.array([self._arm_of(s) for s in range(len(self.sources))], dtype=float)[source_of]
        cols["index"] = np.arange(len(self), dtype=float)
        cols["ok"] = np.concatenate(ok) if ok else np.zeros(0, dtype=bool)
        return cols

    @property
    def texts(self) -> list[str]:
        """Per episode its question and task id in lower case, for the text filter."""
        briefs = self.briefs
        with self._lock:
            if len(self._text) != len(briefs):
                self._text = [f"{b['question'] or ''}\n{b['task_id'] or ''}".lower() for b in briefs]
            return self._text

    def _arm_of(self, source: int) -> int:
        s = self.sources[source]
        key = (s.run, None) if s.step is not None else (s.run, s.label)
        return next(i for i, arm in enumerate(self.arms) if (arm["run"], arm["agent"]) == key)

    def load_in_background(self) -> threading.Thread:
        """Start reading the summary columns in a thread, so they are ready sooner."""
        thread = threading.Thread(target=lambda: self.columns, name="searchgym-viewer-index", daemon=True)
        thread.start()
        return thread

    def row(self, gid: int) -> dict[str, Any]:
        """What the list shows of episode ``gid`` (read from its line while the columns are not
        read yet); `Malformed` if its line is not an episode."""
        cols = self._cols
        if cols is None:
            return self._line_row(gid)
        if not cols["ok"][gid]:
            raise Malformed(f"episode {gid} is skipped: its line is malformed")
        source, arm = int(cols["source"][gid]), int(cols["arm"][gid])
        numbers_of = {name: _plain(cols[name][gid]) for name in _COLUMNS}
        ids = {"id": gid, "source": source, "run": self.sources[source].run, "arm": arm}
        return {**ids, **self._brief[gid], **_named(numbers_of)}

    def _line_row(self, gid: int) -> dict[str, Any]:
        """`row` of episode ``gid`` read from its line."""
        source, line = self.locate(gid)
        numbers, brief = summarize(self.indexes[source].row(line))
        step = self.sources[source].step
        if step is not None:
            numbers = tuple(step if k == "step" and np.isnan(v) else v for k, v in zip(NUMBERS, numbers))
        values = dict(zip(NUMBERS, numbers))
        numbers_of = {name: _plain(values[key]) for name, key in _COLUMNS.items()}
        ids = {"id": gid, "source": source, "run": self.sources[source].run, "arm": self._arm_of(source)}
        return {**ids, **brief, **_named(numbers_of)}

    def page(self, q: Query) -> dict[str, Any]:
        """A page of the list: how many episodes ``q`` keeps (``total``) and their ``rows`` from
        ``q.offset``. The first pages of the unfiltered list need no summary columns: they are
        read line by line, and until the columns are read ``total`` counts every line."""
        if q == Query(sort="index", desc=q.desc, offset=q.offset, limit=q.limit) and self._cols is None:
            quick = self._quick_page(q)
            if quick is not None:
                return quick
        rows = select(self.columns, self.texts if q.text else [], q)
        page, total = rows[q.offset : q.offset + q.limit].tolist(), int(rows.size)
        return {"total": total, "offset": q.offset, "rows": [self.row(g) for g in page]}

    def _quick_page(self, q: Query) -> dict[str, Any] | None:
        """The page of the plain list ``q`` from the lines up to it, or None if one of them is
        malformed or the page is too far in (then it waits for the columns)."""
        n = len(self)
        end = min(q.offset + q.limit, n)
        if end > _QUICK_ROWS:
            return None
        try:
            rows = [self._line_row(n - 1 - g if q.desc else g) for g in range(end)]
        except (Malformed, OSError):
            return None
        return {"total": n, "offset": q.offset, "rows": rows[q.offset :]}

    def summary(self, q: Query) -> dict[str, Any]:
        """A summary row per arm (agent, or training run) over all episodes ``q`` keeps, with the
        EM interval of the run's metrics.json when nothing is filtered out, else a bootstrap
        one; and the hop counts and steps there are to filter on (``facets``)."""
        cols = self.columns
        rows = select(cols, self.texts if q.text else [], q)
        groups = group_summaries(cols, rows, "arm")
        unfiltered = q == Query(sort=q.sort, desc=q.desc, offset=q.offset, limit=q.limit)
        for group in groups:
            arm = self.arms[group["arm"]]
            group.update(run=arm["run"], agent=arm["agent"], ci="bootstrap")
            if unfiltered and arm["interval"] is not None:
                group.update(em_low=arm["interval"][0], em_high=arm["interval"][1], ci="metrics.json")
        return {"total": int(rows.size), "groups": groups, "facets": self.facets()}

    def facets(self) -> dict[str, list[Any]]:
        """The hop counts, training steps and failure kinds found among all episodes, for the filters."""
        cols = self.columns
        found = {
            key: [int(v) for v in np.unique(cols[key][cols["ok"] & np.isfinite(cols[key])])]
            for key in ("hops", "step", "failure")
        }
        return found | {"failure": [KINDS[code] for code in found["failure"]]}

    def by_task(self, source: int) -> dict[str, int]:
        """Task id -> the first episode of it in ``source``."""
        brief, ok = self.briefs, self.columns["ok"]
        out: dict[str, int] = {}
        for gid in range(int(self.first[source]), int(self.first[source + 1])):
            if ok[gid]:
                out.setdefault(brief[gid]["task_id"], gid)
        return out

    def compare(self, a: int, b: int) -> dict[str, Any]:
        """Tasks that sources ``a`` and ``b`` both played: per task both episodes' EM, and which
        of them solved it (``a``, ``b``, ``both``, ``neither``)."""
        for s in (a, b):
            if not 0 <= s < len(self.sources):
                raise ConfigError(f"there is no source {s}; sources are numbered 0..{len(self.sources) - 1}")
        left, right = self.by_task(a), self.by_task(b)
        em = self.columns["em"]
        rows = []
        for task, ga in left.items():
            gb = right.get(task)
            if gb is None:
                continue
            sa, sb = em[ga] >= 1, em[gb] >= 1
            solved = "both" if sa and sb else "a" if sa else "b" if sb else "neither"
            rows.append({"task_id": task, "question": self._brief[ga]["question"], "a": ga, "b": gb,
                         "em_a": _plain(em[ga]), "em_b": _plain(em[gb]), "solved": solved})  # fmt: skip
        return {"a": a, "b": b, "rows": rows}

    def steps(self, run: int) -> list[dict[str, Any]]:
        """`summarize` of a training run's sampled episodes, per step."""
        if not (0 <= run < len(self.runs) and self.runs[run].kind == "train"):
            trains = ", ".join(f"{i} ({r.name})" for i, r in enumerate(self.runs) if r.kind == "train")
            raise ConfigError(f"there is no training run {run}; training runs: {trains or 'none is open'}")
        cols = self.columns
        rows = np.flatnonzero((cols["run"] == run) & cols["ok"])
        return group_summaries(cols, rows, "step")

    def skipped(self) -> list[Skipped]:
        """What could not be read, by run: files and malformed lines (every file is read first)."""
        _ = self.columns
        found = [s for run in self.runs for s in run.skipped]
        found += [f.skipped(s.run) for s, f in zip(self.sources, self.files)]
        return sorted((s for s in found if s is not None), key=lambda s: (s.run, str(s.path)))

    def valid(self) -> int:
        """How many episodes are not skipped (every file is read first)."""
        return int(np.count_nonzero(self.columns["ok"]))

    def overview(self) -> dict[str, Any]:
        """The runs, their sources and arms, and what each run's own files say (metrics, curves).
        A source's ``n`` counts its lines until they have been read, then its episodes."""
        sizes = [int(np.count_nonzero(f.summaries().ok)) if f.read() else len(f.index) for f in self.files]
        runs = [
            {"name": r.name, "kind": r.kind, "path": str(r.path), "metrics": r.metrics, "curves": r.curves,
             "env": r.env, "env_options": r.env_options, "env_label": env_label(r.env, r.env_options)}
            for r in self.runs
        ]  # fmt: skip
        sources = [{"run": s.run, "label": s.label, "step": s.step, "n": n, "file": s.path.name}
                   for s, n in zip(self.sources, sizes)]  # fmt: skip
        arms = [{k: v for k, v in arm.items() if k != "interval"} for arm in self.arms]
        return json_safe(
            {
                "runs": runs,
                "sources": sources,
                "arms": arms,
                "episodes": len(self),
                "failure_kinds": list(KINDS),
            }
        )


def _arms(runs: list[Run], sources: list[Source]) -> list[dict[str, Any]]:
    """What the summary rows compare: each agent of an eval run or sweep, each training run."""
    arms: list[dict[str, Any]] = []
    for s in sources:
        agent = None if s.step is not None else s.label
        if not any((a["run"], a["agent"]) == (s.run, agent) for a in arms):
            arms.append({"run": s.run, "agent": agent, "label": runs[s.run].name if agent is None
                         else f"{runs[s.run].name} · {agent}", "interval": s.interval})  # fmt: skip
    return arms


def json_safe(obj: Any) -> Any:
    """``obj`` with NaN and infinities as None (JSON has neither; Python's json writes them).

    >>> json_safe({"a": [float("nan"), 1.5]})
    {'a': [None, 1.5]}
    """
    if isinstance(obj, float):
        return obj if np.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [json_safe(v) for v in obj]
    return obj


def _named(numbers: dict[str, Any]) -> dict[str, Any]:
    """A row's numbers with its failure kind by name (None where no evaluation judged it)."""
    code = numbers["failure"]
    return numbers | {"failure": None if code is None else KINDS[code]}


def _plain(x: float) -> int | float | None:
    if np.isnan(x):
        return None
    return int(x) if float(x).is_integer() and abs(x) < 2**53 else float(x)
