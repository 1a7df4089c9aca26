"""Per-step training metrics: one JSON line per `log` call in ``RUN_DIR/metrics.jsonl``, and the
same scalars in TensorBoard when it is installed.

Names are namespaced, ``reward/…``, ``loss/…``, ``rollout/…``, ``eval/…`` (any ``ns/name`` is
accepted); `searchgym plot RUN_DIR` draws one figure per namespace. A resumed run calls
`MetricsLog.truncate_after` with its checkpoint's step, so the steps it repeats are not logged
twice.

    with MetricsLog(run_dir) as log:
        log.log(step, {"reward/total": 0.4, "loss/policy": 0.02})
    read_metrics(run_dir)  # [{"step": 1, "reward/total": 0.4, "loss/policy": 0.02}, ...]
"""

from __future__ import annotations

import json
import math
import numbers
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from searchgym.errors import ConfigError, DataNotFoundError, DependencyNotInstalled
from searchgym.files import replace_atomically

METRICS_FILE = "metrics.jsonl"
TENSORBOARD_DIR = "tensorboard"
_NAME = re.compile(r"[^/\s]+/\S+")


class MetricsLog:
    """Append-only metrics of one run directory; ``tensorboard`` None writes TensorBoard events
    too when it is installed, True requires it, False never writes them."""

    def __init__(self, run_dir: str | os.PathLike, *, tensorboard: bool | None = None) -> None:
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / METRICS_FILE
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._writer_cls = None if tensorboard is False else _summary_writer(required=bool(tensorboard))
        _drop_partial_line(self.path)
        rows = _read_rows(self.path) if self.path.is_file() else []
        self._last_step = rows[-1]["step"] if rows else None
        self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()
        self._writer = self._writer_cls(str(self.run_dir / TENSORBOARD_DIR)) if self._writer_cls else None

    @property
    def tensorboard(self) -> bool:
        """Whether TensorBoard events are written."""
        return self._writer_cls is not None

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        """Append ``{"step": step, **metrics}`` and flush it. Steps never go back: a resumed run
        calls `truncate_after` first. Non-finite values are written as null (JSON has no NaN)."""
        if self._file is None:
            raise ConfigError(f"MetricsLog({self.run_dir}) is closed")
        if not isinstance(step, numbers.Integral) or isinstance(step, bool) or step < 0:
            raise ConfigError(f"step must be a non-negative integer, got {step!r}")
        step = int(step)
        if self._last_step is not None and step < self._last_step:
            raise ConfigError(
                f"step {step} is before the last logged step {self._last_step} in {self.path}; "
                f"a resumed run calls truncate_after({step - 1}) first"
            )
        values = {}
        for name, value in metrics.items():
            if not isinstance(name, str) or not _NAME.fullmatch(name):
                raise ConfigError(f"metric name {name!r} must look like 'namespace/name', e.g. 'reward/em'")
            try:
                values[name] = float(value)
            except (TypeError, ValueError) as e:
                raise ConfigError(f"metric {name!r} must be a number, got {value!r}") from e
        row = {"step": step, **{k: v if math.isfinite(v) else None for k, v in values.items()}}
        self._file.write(json.dumps(row) + "\n")
        self._file.flush()
        self._last_step = step
        if self._writer is not None:
            for name, value in values.items():
                self._writer.add_scalar(name, value, step)
            self._writer.flush()

    def truncate_after(self, step: int) -> None:
        """Drop every logged row whose step is greater than ``step`` (in TensorBoard too), so a run
        resumed from the checkpoint of ``step`` logs the steps after it once."""
        if self._file is None:
            raise ConfigError(f"MetricsLog({self.run_dir}) is closed")
        self._file.close()
        rows = [row for row in _read_rows(self.path) if row["step"] <= step]
        with replace_atomically(self.path) as f:
            f.writelines(json.dumps(row) + "\n" for row in rows)
        self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()
        self._last_step = rows[-1]["step"] if rows else None
        if self._writer is not None:
            self._writer.close()
            logdir = str(self.run_dir / TENSORBOARD_DIR)
            self._writer = self._writer_cls(logdir, purge_step=step + 1)

    def close(self) -> None:
        """Close the files; closing twice is fine."""
        if self._file is not None:
            self._file.close()
            self._file = None
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def __enter__(self) -> MetricsLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_metrics(run_dir: str | os.PathLike) -> list[dict[str, Any]]:
    """Every row of ``RUN_DIR/metrics.jsonl`` in order, ``{"step": int, name: float, ...}``, null
    values read as NaN. A last line cut short by a crash is skipped."""
    path = Path(run_dir) / METRICS_FILE
    if not path.is_file():
        raise DataNotFoundError(
            f"no {METRICS_FILE} in {run_dir}: is it the --run-dir of a `searchgym train` run?"
        )
    rows = _read_rows(path)
    return [{k: (math.nan if v is None else v) for k, v in row.items()} for row in rows]


def _read_rows(path: Path) -> list[dict[str, Any]]:
    lines = path.read_text(encoding="utf-8").split("\n")
    rows = []
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            if lineno == len(lines):  # no newline after it: a write cut short
                break
            raise ConfigError(f"{path}:{lineno}: not a JSON line ({e})") from None
        if not isinstance(row, dict) or not isinstance(row.get("step"), int):
            raise ConfigError(f"{path}:{lineno}: expected an object with an integer 'step'")
        rows.append(row)
    return rows


def _drop_partial_line(path: Path) -> None:
    """End the file with a newline so that appending starts a new line: a last line cut short by
    a crash is removed, a complete one without its newline gets it."""
    if not path.is_file() or path.stat().st_size == 0:
        return
    data = path.read_bytes()
    if data.endswith(b"\n"):
        return
    start = data.rfind(b"\n") + 1
    try:
        json.loads(data[start:])
    except ValueError:
        with open(path, "r+b") as f:
            f.truncate(start)
    else:
        with open(path, "ab") as f:
            f.write(b"\n")


def _summary_writer(*, required: bool) -> Any:
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError as e:
        if required:
            raise DependencyNotInstalled(
                "tensorboard=True needs TensorBoard; install it with: pip install 'searchgym[tensorboard]'"
            ) from e
        return None
    return SummaryWriter


EPISODES_DIR = "episodes"


def save_step_episodes(run_dir: str | os.PathLike, step: int, groups: list[list[Any]], n: int) -> Path | None:
    """Save ``n`` of a step's rollout episodes (`searchgym.agents.Episode`, spread over the
    groups) to ``RUN_DIR/episodes/step-NNNNNN.jsonl``, each row with its ``step`` and ``group``
    (the task's index in the step), for `searchgym view`; None when ``n`` is 0."""
    if n <= 0:
        return None
    flat = [(g, episode) for g, group in enumerate(groups) for episode in group]
    picks = sorted({i * len(flat) // min(n, len(flat)) for i in range(min(n, len(flat)))})
    path = Path(run_dir) / EPISODES_DIR / f"step-{step:06d}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with replace_atomically(path) as f:
        for i in picks:
            group, episode = flat[i]
            f.write(
                json.dumps({**episode.to_dict(), "step": step, "group": group}, ensure_ascii=False) + "\n"
            )
    return path
