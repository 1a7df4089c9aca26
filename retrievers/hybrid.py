"""`Hybrid`: reciprocal-rank fusion of any retrievers."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import replace

from searchgym.retrievers.base import Doc, Retriever, check_batch
from searchgym.retrievers.encoders import DEFAULT_ENCODER, Encoder
from searchgym.retrievers.index import Parts, build_retriever


class Hybrid:
    """Fuse the rankings of several retrievers with reciprocal-rank fusion (Cormack et al., 2009):
    ``score(d) = Σ_i w_i / (rrf_k + rank_i(d))``, ranks counted from 1 in the top ``depth`` of
    each retriever. Ties keep the order in which documents were first seen.

    >>> from searchgym.retrievers import BM25
    >>> docs = [Doc("a", "Paris", "capital of France"), Doc("b", "Rome", "capital of Italy")]
    >>> fused = Hybrid([BM25.build(docs), BM25.build(docs)], weights=[1.0, 0.5])
    >>> [(d.id, round(d.score, 4)) for d in fused.search("France", k=2)]
    [('a', 0.0246)]
    """

    def __init__(
        self,
        retrievers: Sequence[Retriever],
        *,
        weights: Sequence[float] | None = None,
        rrf_k: float = 60.0,
        depth: int = 50,
    ) -> None:
        if not retrievers:
            raise ValueError("Hybrid needs at least one retriever")
        weights = list(weights) if weights is not None else [1.0] * len(retrievers)
        if len(weights) != len(retrievers) or any(w < 0 for w in weights):
            raise ValueError(
                f"give one non-negative weight per retriever: {len(retrievers)} retrievers, weights {weights}"
            )
        if rrf_k < 0 or depth < 1:
            raise ValueError(f"rrf_k must be >= 0 and depth >= 1, got {rrf_k} and {depth}")
        self.retrievers, self.weights, self.rrf_k, self.depth = list(retrievers), weights, rrf_k, depth

    @classmethod
    def build(
        cls,
        docs: Iterable[Doc],
        *,
        encoder: Encoder | str = DEFAULT_ENCODER,
        parts: Parts | None = None,
        show_progress: bool = False,
    ) -> Hybrid:
        """The ``hybrid`` retriever kind: BM25 and dense retrieval (with ``encoder``) over ``docs``,
        fused with equal weights. ``parts`` gives those two (see `RetrieverKind`; default: built here)."""
        if parts is None:
            parts = functools.partial(build_retriever, docs=list(docs), show_progress=show_progress)
        return cls([parts("bm25"), parts("dense", encoder=encoder)])

    def search(self, query: str, k: int = 3) -> list[Doc]:
        return self.batch_search([query], k)[0]

    def batch_search(self, queries: Sequence[str], k: int = 3) -> list[list[Doc]]:
        check_batch(queries, k)
        depth = max(k, self.depth)
        per_retriever = [r.batch_search(list(queries), depth) for r in self.retrievers]
        return [self._fuse([ranked[i] for ranked in per_retriever], k) for i in range(len(queries))]

    def _fuse(self, rankings: list[list[Doc]], k: int) -> list[Doc]:
        scores: dict[str, float] = {}
        first: dict[str, Doc] = {}
        for weight, ranking in zip(self.weights, rankings):
            for rank, doc in enumerate(ranking, 1):
                scores[doc.id] = scores.get(doc.id, 0.0) + weight / (self.rrf_k + rank)
                first.setdefault(doc.id, doc)
        order = sorted(first, key=lambda i: -scores[i])  # stable: ties keep first-seen order
        return [replace(first[i], score=scores[i]) for i in order[:k] if scores[i] > 0]

    def doc(self, doc_id: str) -> Doc | None:
        return next((d for r in self.retrievers if (d := r.doc(doc_id)) is not None), None)

    def close(self) -> None:
        for r in self.retrievers:
            r.close()
