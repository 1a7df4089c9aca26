"""Repeated ids in a corpus too large to keep its ids in a dict (21M passages would take
gigabytes): `unique_ids` keeps 8 bytes a document, a hash of each id in sorted runs, and reads the
file again only when a hash repeats, to confirm it and name the two lines."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

from searchgym.errors import ConfigError
from searchgym.retrievers.base import Doc
from searchgym.retrievers.corpus import doc_from_row

BATCH = 10_000
"""Documents checked at once: a repeat is found at most this many documents after it."""


def unique_ids(path: str | os.PathLike, docs: Iterable[Doc]) -> Iterator[Doc]:
    """``docs``, read from the corpus file ``path`` (``read_corpus(path, unique_ids=False)``), as
    they come; an id seen before raises the `ConfigError` that ``read_corpus(path)`` raises,
    ``PATH:LINE: id 'x' is already on line N; ids must be unique``.

    >>> import pathlib, tempfile
    >>> from searchgym.retrievers.corpus import read_corpus
    >>> corpus = pathlib.Path(tempfile.mkdtemp()) / "c.jsonl"
    >>> rows = ['{"id": "a", "text": "x"}', "", '{"id": "b", "text": "y"}', '{"id": "a", "text": "z"}']
    >>> _ = corpus.write_text("\\n".join(rows) + "\\n")
    >>> [d.id for d in unique_ids(corpus, read_corpus(corpus, unique_ids=False))]
    Traceback (most recent call last):
    ...
    searchgym.errors.ConfigError: ...c.jsonl:4: id 'a' is already on line 1; ids must be unique
    """
    seen = _Hashes()
    batch: list[int] = []
    for doc in docs:
        batch.append(hash(doc.id))  # salted per process, which is all it needs to be
        if len(batch) == BATCH:
            _check(path, seen, batch)
            batch = []
        yield doc
    _check(path, seen, batch)


def _check(path: str | os.PathLike, seen: _Hashes, batch: list[int]) -> None:
    if not batch:
        return
    repeated = seen.add(np.array(batch, dtype=np.int64))
    if repeated:
        _raise_if_repeated(Path(path), repeated, seen.count)


class _Hashes:
    """A set of 64-bit hashes as sorted runs whose sizes at least halve from one to the next
    (merged like the digits of a binary counter): adding n hashes costs O(n log n) in all."""

    def __init__(self) -> None:
        self.runs: list[np.ndarray] = []
        self.count = 0

    def add(self, hashes: np.ndarray) -> set[int]:
        """Add ``hashes``; those already in the set, or twice among them."""
        new = np.sort(hashes)
        repeated = set(new[1:][new[1:] == new[:-1]].tolist())
        for run in self.runs:
            at = np.minimum(np.searchsorted(run, new), len(run) - 1)
            repeated.update(new[run[at] == new].tolist())
        self.runs.append(new)
        while len(self.runs) > 1 and len(self.runs[-1]) * 2 > len(self.runs[-2]):
            last = self.runs.pop()
            self.runs[-1] = np.sort(np.concatenate([self.runs[-1], last]), kind="stable")  # a merge
        self.count += len(hashes)
        return repeated


def _raise_if_repeated(path: Path, hashes: set[int], n_docs: int) -> None:
    """Read the first ``n_docs`` documents of ``path`` again, and raise read_corpus's error at the
    first one whose id (hashed into ``hashes``) came before; nothing if none did (two ids with one
    hash, about once in 10^12 corpora of 21M documents)."""
    first: dict[str, int] = {}
    with path.open(encoding="utf-8") as f:
        lineno = 0
        for line in f:
            lineno += 1
            if not line.strip():
                continue
            n_docs -= 1
            doc_id = doc_from_row(json.loads(line)).id
            if hash(doc_id) in hashes:
                if doc_id in first:
                    again = f"is already on line {first[doc_id]}; ids must be unique"
                    raise ConfigError(f"{path}:{lineno}: id {doc_id!r} {again}")
                first[doc_id] = lineno
            if not n_docs:
                return
