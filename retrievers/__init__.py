"""Retrievers: `Doc`, the `Retriever` protocol, corpus files and the search backends."""

from searchgym.retrievers.base import Doc, Retriever
from searchgym.retrievers.bm25 import BM25
from searchgym.retrievers.cached import Cached
from searchgym.retrievers.corpus import read_corpus, write_corpus
from searchgym.retrievers.dense import Dense
from searchgym.retrievers.encoders import Encoder
from searchgym.retrievers.hybrid import Hybrid
from searchgym.retrievers.rerank import Rerank

__all__ = [
    "BM25",
    "Cached",
    "Dense",
    "Doc",
    "Encoder",
    "Hybrid",
    "Rerank",
    "Retriever",
    "read_corpus",
    "write_corpus",
]
