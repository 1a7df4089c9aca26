"""`Cached`: a query → results memo on disk in front of any retriever.

The memo is an SQLite database in WAL mode, so several processes (data-parallel trainers, eval
workers) can share one file: readers never block, writers wait their turn. Entries are keyed by
``namespace`` (name the index behind the retriever, so two indexes never share answers), the
query and ``k``.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path

from searchgym.retrievers.base import Doc, Retriever, check_batch

_SCHEMA = """CREATE TABLE IF NOT EXISTS results (
    namespace TEXT NOT NULL, query TEXT NOT NULL, k INTEGER NOT NULL, docs TEXT NOT NULL,
    PRIMARY KEY (namespace, query, k))"""


class SQLiteFile:
    """An SQLite file in WAL mode with one connection per thread: readers never block, writers
    wait their turn, and several processes can share the file. ``schema`` runs once on open."""

    def __init__(self, path: str | os.PathLike, schema: str) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        with self.connection() as db:
            db.execute(schema)

    def connection(self) -> sqlite3.Connection:
        """This thread's connection."""
        db = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(self.path, timeout=60)
            db.execute("PRAGMA journal_mode=WAL")
            self._local.db = db
        return db

    def close(self) -> None:
        """Close this thread's connection."""
        db = getattr(self._local, "db", None)
        if db is not None:
            db.close()
            self._local.db = None


class Cached:
    """Memoise ``inner``'s results in ``path``. ``hits`` and ``misses`` count lookups.

    >>> import tempfile
    >>> from searchgym.retrievers import BM25
    >>> inner = BM25.build([Doc("a", "Paris", "capital of France")])
    >>> cache = Cached(inner, tempfile.mkdtemp() + "/memo.sqlite", namespace="demo")
    >>> cache.search("France") == cache.search("France") == inner.search("France")
    True
    >>> cache.hits, cache.misses
    (1, 1)
    """

    def __init__(self, inner: Retriever, path: str | os.PathLike, *, namespace: str) -> None:
        if not namespace:
            raise ValueError("give the cache a namespace naming the index, e.g. 'wiki18-bm25'")
        self.inner, self.namespace = inner, namespace
        self._file = SQLiteFile(path, _SCHEMA)
        self.path = self._file.path
        self.hits = self.misses = 0

    def search(self, query: str, k: int = 3) -> list[Doc]:
        return self.batch_search([query], k)[0]

    def batch_search(self, queries: Sequence[str], k: int = 3) -> list[list[Doc]]:
        check_batch(queries, k)
        db = self._file.connection()
        found: dict[str, list[Doc]] = {}
        for q in dict.fromkeys(queries):  # each distinct query once
            row = db.execute(
                "SELECT docs FROM results WHERE namespace=? AND query=? AND k=?", (self.namespace, q, k)
            ).fetchone()
            if row is not None:
                found[q] = [Doc(**d) for d in json.loads(row[0])]
        missing = [q for q in dict.fromkeys(queries) if q not in found]
        self.hits += len(found)
        self.misses += len(missing)
        if missing:
            fresh = self.inner.batch_search(missing, k)
            with db:
                db.executemany(
                    "INSERT OR REPLACE INTO results VALUES (?, ?, ?, ?)",
                    [
                        (self.namespace, q, k, json.dumps([d.__dict__ for d in docs], ensure_ascii=False))
                        for q, docs in zip(missing, fresh)
                    ],
                )
            found.update(zip(missing, fresh))
        return [list(found[q]) for q in queries]

    def doc(self, doc_id: str) -> Doc | None:
        return self.inner.doc(doc_id)

    def close(self) -> None:
        self._file.close()
        self.inner.close()
