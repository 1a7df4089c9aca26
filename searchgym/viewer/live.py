"""The viewer's table kept up to date while runs are written: a trainer adds
``episodes/step-NNNNNN.jsonl`` files and ``metrics.jsonl`` lines after the viewer has opened
its run, and the page asks for them by polling `LiveTable.refresh` (``GET /api/version``).

A refresh looks at each run's `stamp` (a ``stat`` per file: no file is read) and, when one has
changed, reads that run again and builds the next table with the current one as ``previous``,
so only new or changed files are read and the numbers of episodes already shown stay the same.
Requests in flight keep the table they started with: a table is never changed, only replaced.
A metrics.json, sweep.json or config.json that could be read before and cannot now is taken
for one caught half written: the refresh keeps the table it had and says why.
"""

from __future__ import annotations

import logging
import threading
import time

from searchgym.errors import ConfigError, SearchGymError
from searchgym.viewer.runs import reload, stamp
from searchgym.viewer.table import EpisodeTable

log = logging.getLogger(__name__)


class LiveTable:
    """The current `EpisodeTable` of some runs (`table`) and how many times it has been
    replaced (`version`). `refresh` looks at the runs' files at most once per ``min_interval``
    seconds; between those it answers at once."""

    def __init__(self, table: EpisodeTable, *, min_interval: float = 1.0) -> None:
        self.table = table
        self.version = 0
        self.problem: str | None = None
        """Why the last refresh could not read a run (it then keeps the table it had and tries
        again at the next refresh), or None."""
        self.min_interval = min_interval
        self._stamps = [stamp(run) for run in table.runs]
        self._checked = time.monotonic()
        self._lock = threading.Lock()

    def refresh(self) -> int:
        """Read again the runs whose files have changed; the `version` after it."""
        if time.monotonic() - self._checked < self.min_interval or not self._lock.acquire(blocking=False):
            return self.version
        try:
            self._checked = time.monotonic()
            stamps = [stamp(run) for run in self.table.runs]
            if stamps == self._stamps:
                return self.version
            runs = [
                reload(i, run) if new != old else run
                for i, (run, new, old) in enumerate(zip(self.table.runs, stamps, self._stamps))
            ]
            for run, before in zip(runs, self.table.runs):
                had = {s.path for s in before.skipped if s.lines is None}
                broken = [s for s in run.skipped if s.lines is None and s.path not in had]
                if broken:
                    raise ConfigError(f"{broken[0].path} {broken[0].reasons[0]}")
            table = EpisodeTable(runs, previous=self.table)
        except (SearchGymError, OSError) as e:  # e.g. a metrics.json caught half written
            self.problem = f"could not read the runs again: {e}"
            log.warning("%s", self.problem)
            return self.version
        else:
            table.load_in_background()
            self.table, self._stamps, self.problem = table, stamps, None
            self.version += 1
            return self.version
        finally:
            self._lock.release()
