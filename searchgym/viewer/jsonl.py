"""Episodes JSONL read lazily: the byte offset of every line, a line read when it is asked for,
and every line checked once (`read_episode`) when the summaries are read.

Opening a file reads it once to find its newlines (in chunks, with numpy) and parses nothing;
`LineIndex.row` reads one line. `LineIndex.summaries` reads them all (one pass, in the
background) into `Summaries`: the numbers and text a list of episodes shows, and which lines are
malformed and why. A malformed line (not a JSON object, a field the viewer reads of the wrong
type, nested too deeply, not UTF-8, a number too long, a line too long) is skipped and counted,
never shown: `read_episode` is the one place that decides, so every view can trust what it gets.
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from searchgym.errors import ConfigError
from searchgym.failure_kinds import KINDS

_CHUNK = 1 << 24  # 16 MiB read at a time when indexing
MAX_LINE_BYTES = 16 << 20
"""A longer line is skipped unread (an episode of many long web pages is about 2 MB)."""
MAX_DEPTH = 32
"""Lists and objects nested deeper than this are skipped (an episode nests 4 deep)."""
MAX_REASONS = 3
"""How many malformed lines of a file `Summaries` says why of."""


class Malformed(ConfigError):
    """A line that is not an episode the viewer can show; the message says why."""


class LineIndex:
    """The non-blank lines of a JSONL file, by number from 0. A last line without its newline
    (a writer still at work) counts only if it parses, or if it is too long to be one."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self.starts, self.ends, self.numbers = _line_bounds(self.path)

    @classmethod
    def empty(cls, path: str | os.PathLike) -> LineIndex:
        """No lines: the index of a file that cannot be read."""
        index = cls.__new__(cls)
        index.path = Path(path)
        index.starts = index.ends = np.zeros(0, dtype=np.int64)
        index.numbers = None
        return index

    def __len__(self) -> int:
        return len(self.starts)

    def line_number(self, i: int) -> int:
        """The number of line ``i`` in the file, from 1 (blank lines count there)."""
        return int(self.numbers[i]) if self.numbers is not None else i + 1

    def raw(self, i: int) -> bytes:
        """Line ``i`` as bytes, without its newline."""
        if not 0 <= i < len(self):
            raise IndexError(f"{self.path} has {len(self)} lines; there is no line {i}")
        with self.path.open("rb") as f:
            f.seek(int(self.starts[i]))
            return f.read(int(self.ends[i] - self.starts[i]))

    def row(self, i: int) -> dict[str, Any]:
        """Line ``i`` read as an episode (`read_episode`); `Malformed` if it is not one."""
        size = int(self.ends[i] - self.starts[i]) if 0 <= i < len(self) else 0
        if size > MAX_LINE_BYTES:  # not read at all
            raise Malformed(_too_long(size))
        return read_episode(self.raw(i))

    def summaries(self) -> Summaries:
        """`summarize` of every line that `read_episode` accepts (one read of the file)."""
        data = self.path.read_bytes()
        numbers: list[tuple[float, ...]] = []
        briefs: list[dict[str, Any]] = []
        bad: list[int] = []
        reasons: list[str] = []
        for i, (a, b) in enumerate(zip(self.starts.tolist(), self.ends.tolist())):
            try:
                if b - a > MAX_LINE_BYTES:
                    raise Malformed(_too_long(b - a))
                row, brief = summarize(read_episode(data[a:b]))
            except Malformed as e:
                row, brief = _NO_NUMBERS, _NO_BRIEF
                bad.append(i)
                if len(reasons) < MAX_REASONS:
                    reasons.append(f"line {self.line_number(i)}: {e}")
            numbers.append(row)
            briefs.append(brief)
        ok = np.ones(len(self), dtype=bool)
        ok[bad] = False
        table = np.array(numbers, dtype=float).reshape(len(numbers), len(NUMBERS))
        return Summaries(table, briefs, ok, tuple(reasons))


@dataclass(frozen=True)
class Summaries:
    """What one pass over an episodes file gives, a row per line (`LineIndex`)."""

    numbers: np.ndarray
    """`NUMBERS` of each line's episode; NaN where it has none, and on malformed lines."""
    briefs: list[dict[str, Any]]
    """`BRIEF` fields of each line's episode (all None on a malformed line)."""
    ok: np.ndarray
    """False on a malformed line."""
    reasons: tuple[str, ...]
    """Why the first `MAX_REASONS` malformed lines are: ``line 4: turns is a number, not a list``."""

    @property
    def malformed(self) -> int:
        return int(len(self.ok) - np.count_nonzero(self.ok))

    @classmethod
    def unread(cls, lines: int) -> Summaries:
        """Those of a file of ``lines`` lines that could not be read: none is an episode."""
        nothing = np.full((lines, len(NUMBERS)), np.nan)
        return cls(nothing, [_NO_BRIEF] * lines, np.zeros(lines, dtype=bool), ())


def _line_bounds(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
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
    if size and not last.endswith(b"\n"):  # a last line still being written, or one too long
        tail_start = int(ends[-1]) + 1 if ends.size else 0
        if size - tail_start > MAX_LINE_BYTES or _parses(path, tail_start):
            starts = np.append(starts, tail_start)
            ends = np.append(ends, size)
    keep = ends - starts > 1  # blank lines
    if keep.all():
        return starts, ends, None
    with path.open("rb") as f:
        data = f.read()
    keep = np.array([bool(data[a:b].strip()) for a, b in zip(starts.tolist(), ends.tolist())], dtype=bool)
    return starts[keep], ends[keep], np.flatnonzero(keep) + 1


def _parses(path: Path, start: int) -> bool:
    with path.open("rb") as f:
        f.seek(start)
        try:
            json.loads(f.read())
        except (ValueError, RecursionError):
            return False
    return True


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
    "failure",
)
"""The numbers `summarize` gives of an episode, NaN where it has none (``failure``: the index of
its kind in `searchgym.agents.play.failures.KINDS`, where an evaluation judged it)."""
BRIEF = ("task_id", "question", "prediction", "answers")
"""The rest of what it gives: what a list of episodes shows."""
_NAN = math.nan
_FAILURE_CODES = {kind: i for i, kind in enumerate(KINDS)}
_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")  # may start a lone surrogate, which is not text
_NO_BRIEF = dict.fromkeys(BRIEF)
_NO_NUMBERS = (_NAN,) * len(NUMBERS)
_NONE = type(None)
_TEXT, _NUMBER = frozenset({str, _NONE}), frozenset({int, float, _NONE})
_LIST, _OBJECT = frozenset({list, _NONE}), frozenset({dict, _NONE})
_COUNTED = ("em", "f1", "n_searches", "n_invalid", "n_errors", "obs_tokens", "total_reward", "step", "group")
"""The `NUMBERS` an episode has as fields (the rest are counted or from its metadata)."""
_EPISODE = (
    *(("task_id", _TEXT), ("question", _TEXT), ("prediction", _TEXT), ("failure", _TEXT)),
    *((key, _NUMBER) for key in _COUNTED),
    *(("answers", _LIST), ("evidence", _LIST), ("reward_components", _OBJECT), ("metadata", _OBJECT)),
    ("turns", frozenset({list})),
)
"""What `read_episode` checks of an episode, field by field: the types it may have."""
_TURN = (
    ("action", frozenset({str})),
    *((key, _TEXT) for key in ("observation", "tool", "error", "query")),
    *((key, _NUMBER) for key in ("reward", "info_gain", "obs_tokens")),
    *(("doc_ids", _LIST), ("reward_components", _OBJECT)),
)
"""... and of each of its turns."""
_METADATA = (("hops", _NUMBER), ("chain", _LIST))
_KINDS = {dict: "an object", list: "a list", str: "a string", int: "a number", float: "a number",
          bool: "true or false", _NONE: "null"}  # fmt: skip


def read_episode(line: bytes) -> dict[str, Any]:
    """One line of an episodes JSONL file as an episode, checked: every field the viewer reads
    has the type it expects (``turns`` a list of objects, each with a string ``action``;
    numbers numbers, texts strings, each may be null or missing), or `Malformed` says why not.

    >>> read_episode(b'{"task_id": "t", "turns": [{"action": "<answer> a </answer>"}], "em": 1}')["em"]
    1
    >>> read_episode(b'{"task_id": "t", "turns": 5}')
    Traceback (most recent call last):
    ...
    searchgym.viewer.jsonl.Malformed: turns is a number, not a list
    """
    if len(line) > MAX_LINE_BYTES:
        raise Malformed(_too_long(len(line)))
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as e:
        raise Malformed(f"not UTF-8 text (byte 0x{line[e.start]:02x} at {e.start})") from None
    try:
        row = json.loads(text.removeprefix("\ufeff"))
    except RecursionError:
        raise Malformed(f"nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as e:
        raise Malformed(_not_json(e)) from None
    if type(row) is not dict:
        raise Malformed(f"{_kind(row)}, not a JSON object")
    if text.count("[") + text.count("{") > MAX_DEPTH and _too_deep(row):
        raise Malformed(f"nested deeper than {MAX_DEPTH} levels")
    if _SURROGATE.search(text) and not _encodes(row):
        raise Malformed("holds half of a UTF-16 surrogate pair (a \\udXXX escape alone), which is not text")
    _check(row)
    return row


def summarize(row: dict[str, Any]) -> tuple[tuple[float, ...], dict[str, Any]]:
    """The `NUMBERS` (``hops`` from its metadata, ``n_turns`` counted; NaN where missing or not
    finite) and `BRIEF` fields of an episode that `read_episode` accepted.

    >>> row = read_episode(b'{"task_id": "t", "question": "Q?", "answers": ["a"], "metadata": {"hops": 2}, '
    ...     b'"turns": [{"action": "<search> x </search>"}, {"action": "a"}], "prediction": "a", '
    ...     b'"em": 1.0, "n_searches": 1, "step": 3}')
    >>> numbers, brief = summarize(row)
    >>> dict(zip(NUMBERS, numbers))["hops"], numbers[:3], numbers[-5:-2], brief["question"]
    (2.0, (1.0, nan, 1.0), (2.0, 2.0, 3.0), 'Q?')
    """
    get = row.get
    metadata = get("metadata")
    hops = metadata.get("hops") if metadata else None
    kind = _FAILURE_CODES.get(get("failure"))
    values = (*map(get, _COUNTED[:7]), len(row["turns"]), hops, get("step"), get("group"), kind)  # as NUMBERS
    # as floats, NaN where None or not finite (x - x is 0 only for a finite x)
    numbers = tuple(_NAN if v is None or (x := float(v)) - x != 0.0 else x for v in values)
    return numbers, {"task_id": get("task_id"), "question": get("question"), "prediction": get("prediction"),
                     "answers": get("answers")}  # fmt: skip


def summarize_line(line: bytes) -> tuple[tuple[float, ...], dict[str, Any]]:
    """`summarize` of `read_episode` of ``line``."""
    return summarize(read_episode(line))


def _check(row: dict[str, Any]) -> None:
    """`Malformed` unless the fields of ``row`` that the viewer reads have the types it expects."""
    get = row.get
    if "turns" not in row:
        raise Malformed("no turns: not an episode")
    _fields(row, _EPISODE, "")
    for key, value in zip(_COUNTED, map(get, _COUNTED)):  # summed up as floats: an int may be too large
        if type(value) is int:
            _countable(value, key)
    for answer in get("answers") or ():
        if type(answer) is not str:
            raise Malformed(f"an answer is {_kind(answer)}, not a string")
    _numbers(get("reward_components"), "")
    metadata = get("metadata")
    if metadata:
        _fields(metadata, _METADATA, "metadata.")
        _countable(metadata.get("hops"), "metadata.hops")
        for link in metadata.get("chain") or ():
            if type(link) is not dict:
                raise Malformed(f"a link of metadata.chain is {_kind(link)}, not an object")
    for i, turn in enumerate(get("turns")):
        if type(turn) is not dict:
            raise Malformed(f"turn {i + 1} is {_kind(turn)}, not an object")
        _fields(turn, _TURN, i + 1)
        _numbers(turn.get("reward_components"), i + 1)


def _fields(obj: dict[str, Any], schema: tuple[tuple[str, frozenset], ...], where: str | int) -> None:
    """`Malformed` unless each field of ``schema`` has one of its types in ``obj``, which is the
    episode (``where`` ""), its metadata ("metadata.") or its turn ``where`` (from 1)."""
    get = obj.get
    for key, allowed in schema:
        if type(get(key)) not in allowed:
            wanted = " or ".join(sorted({_KINDS[t] for t in allowed if t is not _NONE}))
            raise Malformed(f"{_name(where, key)} is {_kind(get(key))}, not {wanted}")


def _name(where: str | int, key: str) -> str:
    return f"turn {where}'s {key}" if isinstance(where, int) else where + key


def _countable(value: Any, name: str) -> None:
    if type(value) is int and value.bit_length() > 1023:
        raise Malformed(f"{name} is a number of {len(str(value))} digits, too large to count with")


def _numbers(value: dict[str, Any] | None, where: str | int) -> None:
    """`Malformed` unless every value of the ``reward_components`` of ``where`` is a number."""
    if value:
        for key, number in value.items():
            if type(number) not in _NUMBER:
                raise Malformed(f"{_name(where, 'reward_components')}.{key} is {_kind(number)}, not a number")


def _kind(value: Any) -> str:
    return _KINDS.get(type(value), type(value).__name__)


def _too_deep(value: Any) -> bool:
    """Whether lists and objects nest more than `MAX_DEPTH` deep in ``value`` (walked without
    recursion)."""
    todo = [(value, 1)]
    while todo:
        item, depth = todo.pop()
        if type(item) is dict:
            item = item.values()
        elif type(item) is not list:
            continue
        if depth > MAX_DEPTH:
            return True
        todo.extend((child, depth + 1) for child in item)
    return False


def _encodes(row: dict[str, Any]) -> bool:
    """Whether ``row`` is text through and through: no lone surrogate, which UTF-8 cannot hold."""
    try:
        json.dumps(row, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _not_json(e: ValueError) -> str:
    if "integer string conversion" in str(e):  # Python's limit on the digits of an int
        return f"holds a number of more than {sys.get_int_max_str_digits()} digits"
    return f"not JSON ({e})"


def _too_long(size: int) -> str:
    return f"{_size(size)} long, more than the {_size(MAX_LINE_BYTES)} a line may have"


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n and n % 2**20 == 0 else f"{n:,} bytes"
