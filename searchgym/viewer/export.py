"""The viewer as one self-contained HTML file: the page, its scripts and style sheet, and the
episodes, all inline. It needs no server and fetches nothing, so it can be mailed or attached
to a paper's appendix; the page filters, sorts and compares in the browser.

What could not be read is left out and said so (`Export.skipped`, shown in the page too): files
and malformed lines, and a run with nothing left to show."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from searchgym.errors import ConfigError, SearchGymError
from searchgym.files import check_writable_dir
from searchgym.viewer.page import render_page
from searchgym.viewer.runs import Skipped, discover, reload
from searchgym.viewer.table import EpisodeTable


@dataclass(frozen=True)
class Export:
    path: Path
    episodes: int
    """Episodes written into the file."""
    left_out: int
    """Episodes not written: those after the first ``max_per_source`` of a source."""
    skipped: tuple[Skipped, ...] = ()
    """Files and malformed lines that were not read."""
    runs_left_out: tuple[str, ...] = ()
    """Runs with no episode (nor training curve) to show, left out of the file."""

    def report(self) -> str | None:
        """What was skipped, in one line; None if nothing was.

        >>> Export(Path("v.html"), 3, 0, (Skipped(0, Path("/x/a.jsonl"), 2, ("line 1: not JSON",)),)).report()
        'skipped 2 malformed lines in 1 file: /x/a.jsonl (line 1: not JSON)'
        """
        if not self.skipped and not self.runs_left_out:
            return None
        lines = sum(s.lines or 0 for s in self.skipped)
        with_lines = sum(1 for s in self.skipped if s.lines)
        files = sum(1 for s in self.skipped if s.lines is None)
        counts = []
        if lines:
            counts.append(
                f"{lines} malformed {_plural(lines, 'line')} in {with_lines} {_plural(with_lines, 'file')}"
            )
        if files:
            counts.append(f"{files} unreadable {_plural(files, 'file')}")
        said = ", ".join(f"{s.path} ({s.reasons[0]})" for s in self.skipped)
        line = f"skipped {' and '.join(counts)}: {said}" if self.skipped else ""
        if self.runs_left_out:
            runs = f"{_plural(len(self.runs_left_out), 'run')} {', '.join(self.runs_left_out)}"
            line += f"{'; ' * bool(line)}left out {runs}: nothing to show"
        return line


def _plural(n: int, word: str) -> str:
    return word if n == 1 else word + "s"


def check_export_path(out: str | os.PathLike) -> Path:
    """``out`` as the HTML file to write, checked before any work: not a directory, in a folder
    that is one (or can be made one) and can be written. Else a one-line `ConfigError`.

    >>> check_export_path("/dev/null/viewer.html")
    Traceback (most recent call last):
    ...
    searchgym.errors.ConfigError: --export /dev/null: /dev/null is a file, not a directory; choose another ...
    """
    path = Path(out)
    if path.is_dir():
        raise ConfigError(
            f"--export {path} is a directory; name the file to write, such as {path / 'viewer.html'}"
        )
    check_writable_dir(path.parent, "--export")
    return path


def export_html(
    paths: Sequence[str | os.PathLike] | EpisodeTable,
    out: str | os.PathLike,
    *,
    max_per_source: int | None = 1000,
) -> Export:
    """Write the viewer over the runs under ``paths`` to the file ``out``, with the first
    ``max_per_source`` episodes of each agent or training step (None: all of them). Malformed
    lines and unreadable files are left out, and so is a run with nothing else; `ConfigError`
    if no run has anything to show."""
    if max_per_source is not None and max_per_source < 1:
        raise ConfigError(f"max_per_source must be at least 1 (or None for all), got {max_per_source}")
    path = check_export_path(out)
    table = paths if isinstance(paths, EpisodeTable) else EpisodeTable(discover(paths))
    skipped = table.skipped()  # reads every file
    table_runs = table.runs
    empty = [i for i in range(len(table.runs)) if not table.runs[i].curves and not _has_episodes(table, i)]
    shown = [s.to_dict() for s in skipped]
    if len(empty) == len(table.runs):
        raise ConfigError(
            "nothing to export: " + ("; ".join(s.message for s in skipped) or "there is no episode")
        )
    if empty:
        kept = [i for i in range(len(table.runs)) if i not in empty]
        for entry in shown:  # numbered as the runs in the file, None for a run left out
            entry["run"] = kept.index(entry["run"]) if entry["run"] in kept else None
        table = EpisodeTable([reload(j, table.runs[i]) for j, i in enumerate(kept)], previous=table)
    ok = table.columns["ok"]
    ids: list[int] = []
    for s in range(len(table.sources)):
        valid = np.flatnonzero(ok[int(table.first[s]) : int(table.first[s + 1])]) + int(table.first[s])
        ids.extend(valid[:max_per_source].tolist())
    left_out = table.valid() - len(ids)
    intervals = {i: arm["interval"] for i, arm in enumerate(table.arms) if arm["interval"] and not left_out}
    data = {
        "overview": table.overview(),
        "rows": [table.row(g) for g in ids],
        "episodes": {g: table.episode(g) for g in ids},
        "intervals": intervals,
        "skipped": {"episodes": table.valid(), "skipped": shown},
    }
    page = render_page(inline=True, data=data)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(page, encoding="utf-8")
    except OSError as e:  # checked above: a full disk, or the folder changed meanwhile
        raise SearchGymError(f"could not write {path} ({e.strerror or e})") from e
    left = tuple(table_runs[i].name for i in empty)
    return Export(path, len(ids), left_out, tuple(skipped), left)


def _has_episodes(table: EpisodeTable, run: int) -> bool:
    cols = table.columns
    return bool(np.any(cols["ok"] & (cols["run"] == run)))
