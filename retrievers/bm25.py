"""BM25 over bm25s: the embedded default retriever.

Documents are indexed as ``title + "\\n" + text``. Only documents that share at least one term
with the query are returned, so a query of stopwords or unknown words returns ``[]``. Equal scores
rank in corpus order, and ``batch_search(qs, k)`` equals ``[search(q, k) for q in qs]`` exactly.

The defaults score like pyserini (Anserini's Lucene BM25, which Search-R1 uses for wiki-18): the
``"lucene"`` analyzer (`searchgym.retrievers.analysis`), k1 0.9, b 0.4, and with method
``"lucene"`` Lucene's own arithmetic, one-byte document lengths included. ``analyzer="bm25s"`` is
bm25s's tokenizer (words of two or more letters, its English stopwords, no stemming), the only
one before there was a choice: indexes saved then (no ``analyzer`` in their metadata) load and
score as they did. Search runs document at a time with Lucene's MaxScore pruning in a compiled
kernel (`searchgym.retrievers.bm25_kernel`, numba), exhaustive in its result.
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import bm25s
import numpy as np
from tqdm.auto import tqdm

from searchgym.errors import ConfigError
from searchgym.retrievers.analysis import LUCENE_STOPWORDS, LuceneAnalyzer
from searchgym.retrievers.base import Doc, check_batch
from searchgym.retrievers.bm25_kernel import search_range
from searchgym.retrievers.corpus import read_corpus, write_corpus
from searchgym.retrievers.index import read_meta, staged, write_meta

_DOCS = "docs.jsonl"
_INDEX = "bm25s"
ANALYZERS = ("lucene", "bm25s")
METHODS = ("lucene", "robertson", "atire", "bm25l", "bm25+")


class BM25:
    """Okapi BM25 (Lucene's variant by default), indexed in bm25s's format.

    ``stopwords`` is ``"en"`` (the analyzer's English list: Lucene's 33 words, or bm25s's), None,
    or a list of words. ``n_threads``: threads one `batch_search` spreads its queries over
    (1 or 0: the calling thread; -1: one per CPU core).

    >>> bm25 = BM25.build([Doc("a", "Paris", "capital of France"), Doc("b", "Rome", "capital of Italy")])
    >>> [d.id for d in bm25.search("capital of France", k=2)]
    ['a', 'b']
    """

    def __init__(self, index: bm25s.BM25, docs: Sequence[Doc], params: dict) -> None:
        self._index = index
        self._docs = list(docs)
        self._by_id = {d.id: i for i, d in enumerate(self._docs)}
        self.params = params
        self.n_threads = 1
        self._terms = _query_terms(params)
        scores = index.scores
        # plain arrays (memory maps stay lazy): numba does not take np.memmap
        self._postings = tuple(np.asarray(scores[key]) for key in ("data", "indices", "indptr"))
        self._arrays: tuple | None = None  # see _search_arrays, made by the first search

    @classmethod
    def build(
        cls,
        docs: Iterable[Doc],
        *,
        k1: float = 0.9,
        b: float = 0.4,
        method: str = "lucene",
        analyzer: str = "lucene",
        stopwords: str | Sequence[str] | None = "en",
        show_progress: bool = False,
    ) -> BM25:
        docs = list(docs)
        if not docs:
            raise ValueError("cannot build a BM25 index from an empty corpus")
        if analyzer not in ANALYZERS:
            raise ConfigError(f"analyzer must be one of {ANALYZERS}, got {analyzer!r}")
        if method not in METHODS:
            raise ConfigError(f"method must be one of {METHODS}, got {method!r}")
        if analyzer == "lucene" and isinstance(stopwords, str) and stopwords != "en":
            raise ConfigError(f'stopwords must be "en", None or a list of words, got {stopwords!r}')
        stopwords = list(stopwords) if stopwords is not None and not isinstance(stopwords, str) else stopwords
        params = {"k1": k1, "b": b, "method": method, "stopwords": stopwords, "analyzer": analyzer}
        texts = [f"{d.title}\n{d.text}" for d in docs]
        index = bm25s.BM25(k1=k1, b=b, method=method)
        if analyzer == "bm25s":
            tokens = bm25s.tokenize(texts, stopwords=stopwords, return_ids=True, show_progress=show_progress)
            index.index(tokens, show_progress=show_progress)
            return cls(index, docs, params)
        vocab: dict[str, int] = {}
        terms = _lucene_analyzer(stopwords).corpus_terms(
            tqdm(texts, desc="analysing", unit="doc", disable=not show_progress), vocab
        )
        if method == "lucene":
            flat, lengths = array("i"), array("i")
            for ids in terms:
                flat.extend(ids)
                lengths.append(len(ids))
            index.scores = _lucene_scores(np.asarray(flat), np.asarray(lengths), len(vocab), k1, b)
            index.vocab_dict, index.nonoccurrence_array = vocab, None
        else:  # bm25s's own arithmetic over Lucene's terms
            ids = list(terms)
            index.index(bm25s.tokenization.Tokenized(ids=ids, vocab=vocab), show_progress=show_progress)
        return cls(index, docs, params)

    @classmethod
    def from_corpus(cls, path: str | os.PathLike, **kwargs) -> BM25:
        """Build from a JSONL corpus file (either row shape, see `retrievers.corpus`)."""
        return cls.build(read_corpus(path), **kwargs)

    def save(self, directory: str | os.PathLike) -> None:
        """Save to ``directory``, replacing an index there whole or not at all (`staged`)."""
        with staged(directory) as tmp:
            self._index.save(str(tmp / _INDEX), show_progress=False)
            write_corpus(self._docs, tmp / _DOCS)
            write_meta(tmp, {"kind": "bm25", "backend": "bm25s", "n_docs": len(self._docs), **self.params})

    @classmethod
    def load(cls, directory: str | os.PathLike, *, mmap: bool = False) -> BM25:
        directory = Path(directory)
        meta = read_meta(directory, "bm25", "BM25.from_corpus(CORPUS).save(DIR)")
        index = bm25s.BM25.load(str(directory / _INDEX), mmap=mmap, show_progress=False)
        params = {key: meta[key] for key in ("k1", "b", "method", "stopwords")}
        params["analyzer"] = meta.get("analyzer", "bm25s")  # saved before there was a choice
        return cls(index, read_corpus(directory / _DOCS), params)

    def __len__(self) -> int:
        return len(self._docs)

    def search(self, query: str, k: int = 3) -> list[Doc]:
        return self.batch_search([query], k)[0]

    def batch_search(self, queries: Sequence[str], k: int = 3) -> list[list[Doc]]:
        check_batch(queries, k)
        if not queries:
            return []
        vocab = self._index.vocab_dict
        ids = [[vocab[t] for t in terms if t in vocab] for terms in self._terms(list(queries))]
        pointers = np.cumsum([0] + [len(q) for q in ids], dtype=np.int64)
        flat = np.fromiter((i for q in ids for i in q), dtype=np.int32, count=int(pointers[-1]))
        offsets = np.zeros(len(ids), dtype=np.float32)
        absent = getattr(self._index, "nonoccurrence_array", None)
        if absent is not None:  # bm25l and bm25+ score absent terms too
            offsets = np.array([absent[q].sum() for q in ids], dtype=np.float32)
        k = min(k, len(self._docs))
        found = np.empty((len(ids), k), dtype=np.int32)
        scores = np.empty((len(ids), k), dtype=np.float32)
        counts = np.empty(len(ids), dtype=np.int32)

        if self._arrays is None:
            self._arrays = _search_arrays(*self._postings)
        arrays = self._arrays

        def run(start: int, stop: int) -> None:
            search_range(*arrays, flat, pointers, offsets, start, stop, found, scores, counts)

        threads = (os.cpu_count() or 1) if self.n_threads < 0 else max(1, self.n_threads)
        bounds = np.linspace(0, len(ids), min(threads, len(ids)) + 1).astype(int).tolist()
        if len(bounds) == 2:
            run(0, len(ids))
        else:
            with ThreadPoolExecutor(len(bounds) - 1) as pool:
                list(pool.map(run, bounds[:-1], bounds[1:]))
        return [
            [replace(self._docs[j], score=s) for j, s in zip(found[i, :n].tolist(), scores[i, :n].tolist())]
            for i, n in enumerate(counts.tolist())
        ]

    def doc(self, doc_id: str) -> Doc | None:
        i = self._by_id.get(doc_id)
        return None if i is None else self._docs[i]

    def close(self) -> None:
        """Nothing to release: the index lives in memory (or in a read-only memory map)."""


def _lucene_analyzer(stopwords: str | Sequence[str] | None) -> LuceneAnalyzer:
    return LuceneAnalyzer(LUCENE_STOPWORDS if stopwords == "en" else stopwords or ())


def _query_terms(params: dict):
    """The function from a list of queries to their terms, as the index was built."""
    if params["analyzer"] == "lucene":
        analyzer = _lucene_analyzer(params["stopwords"])
        return lambda queries: [analyzer(q) for q in queries]
    return lambda queries: bm25s.tokenize(
        queries, stopwords=params["stopwords"], return_ids=False, show_progress=False
    )


# Lucene's document lengths: SmallFloat.intToByte4 keeps 4 significant bits above 23 tokens.
def _byte4_to_int(code: int) -> int:
    if code < 24:
        return code
    bits, shift = (code - 24) & 7, ((code - 24) >> 3) - 1
    return 24 + (bits if shift < 0 else (bits | 8) << shift)


_LENGTHS = np.array([_byte4_to_int(i) for i in range(256)], dtype=np.int64)


def _lucene_scores(flat: np.ndarray, lengths: np.ndarray, n_terms: int, k1: float, b: float) -> dict:
    """bm25s's score matrix (CSC: one column of documents per term) with the values Lucene's
        BM25Similarity computes, float for float: ``idf - idf / (1 + tf * cache[length byte])`` with
    ``cache[i] = 1 / (k1 * (1 - b + b * LENGTH_TABLE[i] / avgdl))``."""
    n_docs = len(lengths)
    docs = np.repeat(np.arange(n_docs, dtype=np.int64), lengths)
    keys, tf = np.unique(flat.astype(np.int64) * n_docs + docs, return_counts=True)
    del docs
    terms, doc_ids = np.divmod(keys, n_docs)
    df = np.bincount(terms, minlength=n_terms)
    indptr = np.zeros(n_terms + 1, dtype=np.int64)
    np.cumsum(df, out=indptr[1:])
    n_with_terms = max(1, int(np.count_nonzero(lengths)))  # Lucene's docCount
    idf = np.log(1 + (n_with_terms - df + 0.5) / (df + 0.5)).astype(np.float32)
    avgdl = np.float32(lengths.sum() / n_with_terms)
    f1, k1, b = np.float32(1), np.float32(k1), np.float32(b)
    norm_inverse = f1 / (k1 * ((f1 - b) + b * _LENGTHS.astype(np.float32) / avgdl))
    codes = np.searchsorted(_LENGTHS, lengths, side="right") - 1
    weight = idf[terms]
    data = weight - weight / (f1 + tf.astype(np.float32) * norm_inverse[codes[doc_ids]])
    return {"data": data, "indices": doc_ids.astype(np.int32), "indptr": indptr, "num_docs": n_docs}


def _search_arrays(data: np.ndarray, indices: np.ndarray, indptr: np.ndarray) -> tuple:
    """The kernel's view of the score matrix: its arrays (each column's documents in increasing
    order, as bm25s writes them, sorted here otherwise), each term's largest contribution, and
    whether MaxScore may prune with those (no contribution is negative)."""
    upper = np.zeros(len(indptr) - 1, dtype=np.float32)
    if len(data) == 0:
        return data, indices, indptr, upper, False
    filled = np.flatnonzero(np.diff(indptr))
    upper[filled] = np.maximum.reduceat(data, indptr[filled])
    increasing = np.diff(indices.astype(np.int64)) > 0
    starts = indptr[1:-1]
    increasing[starts[(starts > 0) & (starts < len(indices))] - 1] = True
    if not increasing.all():
        order = np.lexsort((indices, np.repeat(np.arange(len(upper)), np.diff(indptr))))
        data, indices = data[order], indices[order]
    return data, indices, indptr, upper, bool(data.min() >= 0)
