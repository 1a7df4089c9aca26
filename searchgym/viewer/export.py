"""The viewer as one self-contained HTML file: the page, its scripts and style sheet, and the
episodes, all inline. It needs no server and fetches nothing, so it can be mailed or attached
to a paper's appendix; the page filters, sorts and compares in the browser."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from searchgym.errors import ConfigError
from searchgym.viewer.page import render_page
from searchgym.viewer.runs import discover
from searchgym.viewer.table import EpisodeTable


@dataclass(frozen=True)
class Export:
    path: Path
    episodes: int
    """Episodes written into the file."""
    left_out: int
    """Episodes not written: those after the first ``max_per_source`` of a source."""


def export_html(
    paths: Sequence[str | os.PathLike] | EpisodeTable,
    out: str | os.PathLike,
    *,
    max_per_source: int | None = 1000,
) -> Export:
    """Write the viewer over the runs under ``paths`` to the file ``out``, with the first
    ``max_per_source`` episodes of each agent or training step (None: all of them)."""
    if max_per_source is not None and max_per_source < 1:
        raise ConfigError(f"max_per_source must be at least 1 (or None for all), got {max_per_source}")
    table = paths if isinstance(paths, EpisodeTable) else EpisodeTable(discover(paths))
    ids: list[int] = []
    for s in range(len(table.sources)):
        first, end = int(table.first[s]), int(table.first[s + 1])
        ids.extend(range(first, end if max_per_source is None else min(end, first + max_per_source)))
    left_out = len(table) - len(ids)
    intervals = {i: arm["interval"] for i, arm in enumerate(table.arms) if arm["interval"] and not left_out}
    data = {
        "overview": table.overview(),
        "rows": [table.row(g) for g in ids],
        "episodes": {g: table.episode(g) for g in ids},
        "intervals": intervals,
    }
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_page(inline=True, data=data), encoding="utf-8")
    return Export(path, len(ids), left_out)
