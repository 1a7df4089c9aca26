"""`Doc`, the value every retriever returns, and the `Retriever` protocol every backend follows."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class Doc:
    """A retrieved document. ``score`` is the backend's relevance score (higher is better);
    documents read from a corpus carry score 0.0."""

    id: str
    title: str
    text: str
    score: float = 0.0

    def contents(self) -> str:
        """The Search-R1 / pyserini ``contents`` form: the title on the first line."""
        return f'"{self.title}"\n{self.text}' if self.title else self.text


@runtime_checkable
class Retriever(Protocol):
    """Search a corpus. ``search`` returns at most ``k`` documents, best first; a query that
    matches nothing returns an empty list. ``batch_search(qs, k)`` equals
    ``[search(q, k) for q in qs]``, usually faster. The envs hand a retriever only clean text
    (`clean_text`), so a backend need not guard against lone surrogates or NULs itself."""

    def search(self, query: str, k: int = 3) -> list[Doc]: ...

    def batch_search(self, queries: Sequence[str], k: int = 3) -> list[list[Doc]]: ...

    def doc(self, doc_id: str) -> Doc | None:
        """The stored document with this id, or None."""
        ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class SearchContext:
    """What an episode knows beyond the query: its question and gold answers. Only retrievers
    that simulate a search engine read it (ZeroSearch's simulator writes documents that do or do
    not contain the answer); it never reaches the agent."""

    question: str
    answers: tuple[str, ...]


@runtime_checkable
class ContextualRetriever(Protocol):
    """A retriever whose results depend on the episode (see `SearchContext`). An env calls
    ``search_in_context`` instead of ``search`` when its retriever has it."""

    def search_in_context(self, query: str, k: int, context: SearchContext) -> list[Doc]: ...


def check_batch(queries: Sequence[str], k: int) -> None:
    """Validate ``batch_search`` arguments; every backend calls this so errors read the same."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    if isinstance(queries, str):
        raise TypeError("batch_search takes a sequence of queries; for one query use search()")


REPLACEMENT_CHARACTER = "\ufffd"
_UNCLEAN = re.compile("[\x00\ud800-\udfff]")


def clean_text(text: str) -> str:
    """``text`` with what backends cannot take replaced by U+FFFD: lone surrogates (U+D800 to
    U+DFFF, which no UTF-8 or UTF-16 encoder writes: tokenizers, the JVM, SQLite and files refuse
    them; JSON ``"\\ud800"`` decodes to one) and NULs (C strings end there; PostgreSQL and NumPy
    byte strings drop or refuse them). Everything else, all of valid Unicode, is kept.

    >>> clean_text("capital\\ud800 of\\x00France") == "capital\\ufffd of\\ufffdFrance"
    True
    >>> clean_text("Zürich 日本") == "Zürich 日本"
    True
    """
    return _UNCLEAN.sub(REPLACEMENT_CHARACTER, text)


def is_clean(text: str) -> bool:
    """Whether `clean_text` would leave ``text`` as it is."""
    return _UNCLEAN.search(text) is None
