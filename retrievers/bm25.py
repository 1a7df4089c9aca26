"""BM25 over bm25s: the embedded default retriever.

Documents are indexed as ``title + "\\n" + text``. Only documents that share at least one term
with the query are returned, so a query of stopwords or unknown words returns ``[]``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path

import bm25s

from searchgym.retrievers.base import Doc, check_batch
from searchgym.retrievers.corpus import read_corpus, write_corpus
from searchgym.retrievers.index import read_meta, write_meta

_DOCS = "docs.jsonl"
_INDEX = "bm25s"


class BM25:
    """Okapi BM25 (Lucene's variant by default) built with bm25s.

    >>> bm25 = BM25.build([Doc("a", "Paris", "capital of France"), Doc("b", "Rome", "capital of Italy")])
    >>> [d.id for d in bm25.search("capital of France", k=2)]
    ['a', 'b']
    """

    def __init__(self, index: bm25s.BM25, docs: Sequence[Doc], params: dict) -> None:
        self._index = index
        self._docs = list(docs)
        self._by_id = {d.id: i for i, d in enumerate(self._docs)}
        self.params = params
        self.n_threads = 0

    @classmethod
    def build(
        cls,
        docs: Iterable[Doc],
        *,
        k1: float = 1.5,
        b: float = 0.75,
        method: str = "lucene",
        stopwords: str | None = "en",
        show_progress: bool = False,
    ) -> BM25:
        docs = list(docs)
        if not docs:
            raise ValueError("cannot build a BM25 index from an empty corpus")
        params = {"k1": k1, "b": b, "method": method, "stopwords": stopwords}
        tokens = bm25s.tokenize(
            [f"{d.title}\n{d.text}" for d in docs],
            stopwords=stopwords,
            return_ids=True,
            show_progress=show_progress,
        )
        index = bm25s.BM25(k1=k1, b=b, method=method)
        index.index(tokens, show_progress=show_progress)
        return cls(index, docs, params)

    @classmethod
    def from_corpus(cls, path: str | os.PathLike, **kwargs) -> BM25:
        """Build from a JSONL corpus file (either row shape, see `retrievers.corpus`)."""
        return cls.build(read_corpus(path), **kwargs)

    def save(self, directory: str | os.PathLike) -> None:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self._index.save(str(directory / _INDEX), show_progress=False)
        write_corpus(self._docs, directory / _DOCS)
        write_meta(directory, {"kind": "bm25", "backend": "bm25s", "n_docs": len(self._docs), **self.params})

    @classmethod
    def load(cls, directory: str | os.PathLike, *, mmap: bool = False) -> BM25:
        directory = Path(directory)
        meta = read_meta(directory, "bm25", "BM25.from_corpus(CORPUS).save(DIR)")
        index = bm25s.BM25.load(str(directory / _INDEX), mmap=mmap)
        params = {key: meta[key] for key in ("k1", "b", "method", "stopwords")}
        return cls(index, read_corpus(directory / _DOCS), params)

    def __len__(self) -> int:
        return len(self._docs)

    def search(self, query: str, k: int = 3) -> list[Doc]:
        return self.batch_search([query], k)[0]

    def batch_search(self, queries: Sequence[str], k: int = 3) -> list[list[Doc]]:
        check_batch(queries, k)
        if not queries:
            return []
        tokens = bm25s.tokenize(
            list(queries),
            stopwords=self.params["stopwords"],
            return_ids=False,
            show_progress=False,
        )
        vocab = self._index.vocab_dict
        tokens = [[t for t in q if t in vocab] for q in tokens]
        results: list[list[Doc]] = [[] for _ in queries]
        live = [i for i, q in enumerate(tokens) if q]
        if not live:
            return results
        found = self._index.retrieve(
            [tokens[i] for i in live],
            k=min(k, len(self._docs)),
            show_progress=False,
            n_threads=self.n_threads,
        )
        for row, i in enumerate(live):
            hits = sorted(
                (-s, j) for j, s in zip(found.documents[row].tolist(), found.scores[row].tolist()) if s > 0
            )  # ties broken by corpus order, whatever order bm25s returned them in
            results[i] = [replace(self._docs[j], score=-s) for s, j in hits]
        return results

    def doc(self, doc_id: str) -> Doc | None:
        i = self._by_id.get(doc_id)
        return None if i is None else self._docs[i]

    def close(self) -> None:
        """Nothing to release: the index lives in memory (or in a read-only memory map)."""
