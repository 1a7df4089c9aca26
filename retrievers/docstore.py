"""`DocStore`: an index's documents on disk, read by position or id without loading the corpus.

A saved index keeps its documents as ``docs.jsonl`` (our corpus shape) beside two arrays:
``docs.offsets.npy`` (the byte offset of every line, plus the file's end) and ``docs.ids.npy``
(the positions of the documents in id order, for lookup by binary search). Opened, the file is
memory-mapped, so a 21M-passage store costs page cache, not process memory. `write_docstore`
writes all three from a stream of documents.

Stores written before the arrays existed are indexed on first open (one scan of the file).
"""

from __future__ import annotations

import json
import mmap
import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from searchgym.errors import ConfigError
from searchgym.retrievers.base import Doc
from searchgym.retrievers.corpus import doc_from_row

DOCS_FILE = "docs.jsonl"
_OFFSETS = "docs.offsets.npy"
_ID_ORDER = "docs.ids.npy"
_CHUNK = 100_000


def write_docstore(docs: Iterable[Doc], directory: str | os.PathLike, *, show_progress: bool = False) -> int:
    """Write ``docs`` (any iterable, consumed once) as a `DocStore` in ``directory``; returns the
    count. Memory grows by about 16 bytes per document plus the id bytes, never the texts."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / DOCS_FILE
    tmp = path.with_name(f".{path.name}.tmp")
    offsets = [np.zeros(1, dtype=np.int64)]
    ids: list[np.ndarray] = []
    chunk_offsets: list[int] = []
    chunk_ids: list[bytes] = []
    position = 0
    try:
        with tmp.open("wb") as f:
            for doc in tqdm(docs, desc="documents", unit=" docs", disable=not show_progress):
                line = json.dumps({"id": doc.id, "title": doc.title, "text": doc.text}, ensure_ascii=False)
                data = (line + "\n").encode("utf-8")
                f.write(data)
                position += len(data)
                chunk_offsets.append(position)
                chunk_ids.append(doc.id.encode("utf-8"))
                if len(chunk_ids) == _CHUNK:
                    offsets.append(np.array(chunk_offsets, dtype=np.int64))
                    ids.append(np.array(chunk_ids, dtype=bytes))
                    chunk_offsets, chunk_ids = [], []
        if chunk_ids:
            offsets.append(np.array(chunk_offsets, dtype=np.int64))
            ids.append(np.array(chunk_ids, dtype=bytes))
        all_offsets = np.concatenate(offsets)
        order = _id_order(np.concatenate(ids) if ids else np.array([], dtype=bytes), path)
    except BaseException:
        tmp.unlink(missing_ok=True)  # whatever was there before stays as it was
        raise
    for stale in (_OFFSETS, _ID_ORDER):  # if we stop before saving them, open() re-indexes
        (directory / stale).unlink(missing_ok=True)
    os.replace(tmp, path)
    np.save(directory / _OFFSETS, all_offsets)
    np.save(directory / _ID_ORDER, order)
    return len(all_offsets) - 1


def _id_order(ids: np.ndarray, path: Path) -> np.ndarray:
    """Positions of ``ids`` in sorted order; duplicate ids are an error."""
    order = np.argsort(ids, kind="stable")
    ordered = ids[order]
    same = np.flatnonzero(ordered[1:] == ordered[:-1])
    if same.size:
        first = ordered[same[0]].decode("utf-8")
        raise ConfigError(
            f"{path}: document id {first!r} occurs more than once ({same.size} repeated ids in all); "
            "ids must be unique"
        )
    return order.astype(np.int64)


class DocStore(Sequence[Doc]):
    """The documents of a saved index: ``store[i]`` is the i-th document, ``store.index_of(id)``
    its position (or None). Reads are thread-safe (they only slice a read-only memory map)."""

    def __init__(self, directory: str | os.PathLike) -> None:
        directory = Path(directory)
        path = directory / DOCS_FILE
        if not (directory / _OFFSETS).is_file() or not (directory / _ID_ORDER).is_file():
            self._index_old_store(path)
        self.path = path
        self._offsets = np.load(directory / _OFFSETS, mmap_mode="r")
        self._order = np.load(directory / _ID_ORDER, mmap_mode="r")
        size = path.stat().st_size
        if int(self._offsets[-1]) != size:
            raise ConfigError(
                f"{path} is {size} bytes but its offsets say {int(self._offsets[-1])}: the file was "
                f"changed after the index was built; rebuild the index"
            )
        with path.open("rb") as f:
            self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else b""

    @staticmethod
    def _index_old_store(path: Path) -> None:
        """Write the offset and id arrays of a docs.jsonl saved without them (older versions)."""
        if not path.is_file():
            raise ConfigError(f"{path} is missing: the index directory is incomplete; rebuild the index")
        offsets, ids, position = [0], [], 0
        with path.open("rb") as f:
            for line in f:
                position += len(line)
                if line.strip():
                    offsets.append(position)
                    ids.append(doc_from_row(json.loads(line)).id.encode("utf-8"))
                else:
                    offsets[-1] = position  # blank lines belong to no document
        np.save(path.with_name(_OFFSETS), np.array(offsets, dtype=np.int64))
        np.save(path.with_name(_ID_ORDER), _id_order(np.array(ids, dtype=bytes), path))

    def __len__(self) -> int:
        return len(self._offsets) - 1

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"document {i} out of range for a store of {n}")
        i %= n
        row = json.loads(self._map[int(self._offsets[i]) : int(self._offsets[i + 1])])
        return doc_from_row(row)

    def __iter__(self) -> Iterator[Doc]:
        return (self[i] for i in range(len(self)))

    def index_of(self, doc_id: str) -> int | None:
        """The position of the document with id ``doc_id``, or None."""
        key = doc_id.encode("utf-8")
        lo, hi = 0, len(self._order)
        while lo < hi:  # binary search over the id order; ids are read from the file lazily
            mid = (lo + hi) // 2
            if self._id_at(int(self._order[mid])) < key:
                lo = mid + 1
            else:
                hi = mid
        if lo < len(self._order) and self._id_at(j := int(self._order[lo])) == key:
            return j
        return None

    def get(self, doc_id: str) -> Doc | None:
        i = self.index_of(doc_id)
        return None if i is None else self[i]

    def _id_at(self, i: int) -> bytes:
        return self[i].id.encode("utf-8")

    def close(self) -> None:
        if isinstance(self._map, mmap.mmap):
            self._map.close()
