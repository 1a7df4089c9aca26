"""Episodes JSONL read lazily: the byte offset of every line, a line parsed when it is asked for,
and a summary of a line (its scalars and question) read without parsing its turns.

Opening a file reads it once to find its newlines (in chunks, with numpy) and parses nothing;
`LineIndex.row` parses one line. `summarize_line` parses only the head of a line (before
``"turns":``) and its tail (from the last ``"prediction":``), which is all a list of episodes
needs: a quote inside a JSON string is always escaped, so those keys cannot be text of an
action or observation. A line written in another key order falls back to a full parse.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from searchgym.errors import ConfigError

_CHUNK = 1 << 24  # 16 MiB read at a time when indexing


class LineIndex:
    """The non-blank lines of a JSONL file, by number from 0. A last line without its newline
    (a writer still at work) counts only if it parses."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        starts, ends = _line_bounds(self.path)
        self.starts, self.ends = starts, ends

    def __len__(self) -> int:
        return len(self.starts)

    def raw(self, i: int) -> bytes:
        """Line ``i`` as bytes, without its newline."""
        if not 0 <= i < len(self):
            raise IndexError(f"{self.path} has {len(self)} lines; there is no line {i}")
        with self.path.open("rb") as f:
            f.seek(int(self.starts[i]))
            return f.read(int(self.ends[i] - self.starts[i]))

    def row(self, i: int) -> dict[str, Any]:
        """Line ``i`` parsed."""
        return _parse(self.raw(i), self.path, i)

    def summaries(self) -> tuple[np.ndarray, list[dict[str, Any]]]:
        """`summarize_line` of every line (one read of the file): a row of `NUMBERS` per line,
        and the `BRIEF` fields of each."""
        data = self.path.read_bytes()
        numbers, briefs = [], []
        for i, (a, b) in enumerate(zip(self.starts.tolist(), self.ends.tolist())):
            try:
                row, brief = summarize_span(data, a, b)
            except ValueError as e:
                raise ConfigError(f"{self.path}: line {i + 1} is not JSON ({e})") from None
            numbers.append(row)
            briefs.append(brief)
        return np.array(numbers, dtype=float).reshape(len(numbers), len(NUMBERS)), briefs


def _line_bounds(path: Path) -> tuple[np.ndarray, np.ndarray]:
    newlines = []
    size = 0
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            found = np.flatnonzero(np.frombuffer(chunk, dtype=np.uint8) == 10) + size
            newlines.append(found)
            size += len(chunk)
            last = chunk
    ends = np.concatenate(newlines) if newlines else np.zeros(0, dtype=np.int64)
    starts = np.concatenate([[0], ends[:-1] + 1]).astype(np.int64) if ends.size else ends
    if size and not last.endswith(b"\n"):  # a last line still being written
        tail_start = int(ends[-1]) + 1 if ends.size else 0
        with path.open("rb") as f:
            f.seek(tail_start)
            try:
                json.loads(f.read())
            except ValueError:
                pass
            else:
                starts = np.append(starts, tail_start)
                ends = np.append(ends, size)
    keep = ends - starts > 1  # blank lines
    if not keep.all():
        with path.open("rb") as f:
            data = f.read()
        keep = np.array([bool(data[a:b].strip()) for a, b in zip(starts.tolist(), ends.tolist())], dtype=bool)
    return starts[keep], ends[keep]


def _parse(line: bytes, path: Path, i: int) -> dict[str, Any]:
    try:
        row = json.loads(line)
    except ValueError as e:
        raise ConfigError(f"{path}: line {i + 1} is not JSON ({e}); is it an episodes JSONL file?") from None
    if not isinstance(row, dict) or "turns" not in row:
        raise ConfigError(f"{path}: line {i + 1} is not an episode (a JSON object with 'turns')")
    return row


NUMBERS = (
    "em",
    "f1",
    "n_searches",
    "n_invalid",
    "n_errors",
    "obs_tokens",
    "total_reward",
    "n_turns",
    "hops",
    "step",
    "group",
)
"""The numbers `summarize_line` gives of an episode, NaN where it has none."""
BRIEF = ("task_id", "question", "prediction", "answers")
"""The rest of what it gives: what a list of episodes shows."""
_NAN = float("nan")


def summarize_line(line: bytes) -> tuple[tuple[float, ...], dict[str, Any]]:
    """The episode of one JSONL line without its turns: its `NUMBERS` (``hops`` from its
    metadata, ``n_turns`` counted) and its `BRIEF` fields.

    >>> row = b'{"task_id": "t", "question": "Q?", "answers": ["a"], "metadata": {"hops": 2}, '
    >>> row += b'"turns": [{"action": "<search> x </search>"}, {"action": "a"}], "prediction": "a", '
    >>> row += b'"em": 1.0, "n_searches": 1, "step": 3}'
    >>> numbers, brief = summarize_line(row)
    >>> dict(zip(NUMBERS, numbers))["hops"], numbers[:3], numbers[-4:-1], brief["question"]
    (2.0, (1.0, nan, 1.0), (2.0, 2.0, 3.0), 'Q?')
    """
    return summarize_span(line, 0, len(line))


def summarize_span(data: bytes, start: int, end: int) -> tuple[tuple[float, ...], dict[str, Any]]:
    """`summarize_line` of the line ``data[start:end]``: parses its head (before ``"turns":``)
    joined to its tail (from the last ``"prediction":``) as one object, copying only those."""
    turns_at = data.find(b'"turns":', start, end)
    tail_at = data.rfind(b'"prediction":', start, end)
    head_end = data.rfind(b",", start, turns_at) if turns_at > start else -1
    try:
        if head_end <= start or tail_at <= turns_at:
            raise ValueError("not in Episode.to_dict order")
        row = json.loads(data[start : head_end + 1] + data[tail_at:end])
        n_turns = data.count(b'"action":', turns_at, tail_at)
    except ValueError:
        row = json.loads(data[start:end])
        n_turns = len(row.get("turns", ()))
    metadata = row.get("metadata")
    row["hops"] = metadata.get("hops") if isinstance(metadata, dict) else None
    row["n_turns"] = n_turns
    numbers = tuple(_number(row.get(k)) for k in NUMBERS)
    return numbers, {k: row.get(k) for k in BRIEF}


def _number(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) else _NAN
