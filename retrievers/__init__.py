"""Retrievers: `Doc`, the `Retriever` protocol, corpus files and the search backends."""

from searchgym.retrievers.base import Doc, Retriever
from searchgym.retrievers.bm25 import BM25
from searchgym.retrievers.corpus import read_corpus, write_corpus

__all__ = ["BM25", "Doc", "Retriever", "read_corpus", "write_corpus"]
