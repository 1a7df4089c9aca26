"""The values the web tools pass around, and the two protocols a web backend implements.

A `PageSource` turns a URL into a `RawPage` (bytes and their content type); extraction turns a
`RawPage` into a `Page` (text, title, numbered links). A `WebSearcher` turns a query into ranked
`SearchResult`s. The offline site, the loopback server, live HTTP and the search APIs are
interchangeable behind these protocols, so `WebEnv` runs on any of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from searchgym.errors import RetrieverError


class FetchError(RetrieverError):
    """A page could not be fetched or read (refused address, timeout, too large, not HTML, HTTP
    error). Environments show the message to the agent; it never ends an episode."""


@dataclass(frozen=True)
class RawPage:
    """A fetched page. ``url`` is where it was finally read from (after redirects);
    ``content_type`` is the Content-Type header as sent (``"text/html; charset=utf-8"``), or ""."""

    url: str
    body: bytes
    content_type: str = ""


@dataclass(frozen=True)
class Link:
    """A followable link: its visible text and its absolute URL."""

    text: str
    url: str


@dataclass(frozen=True)
class Page:
    """A page as the agent reads it: the main text (headings, paragraphs, tables as text, each
    link marked ``[n]`` after its text) and the links, where ``links[n - 1]`` is link ``[n]``."""

    url: str
    title: str
    text: str
    links: tuple[Link, ...] = ()


@dataclass(frozen=True)
class SearchResult:
    """One web search hit, best first in a result list."""

    title: str
    url: str
    snippet: str
    score: float | None = None


@runtime_checkable
class PageSource(Protocol):
    """Where pages come from. ``get`` raises `FetchError` for a page it cannot give."""

    def get(self, url: str) -> RawPage: ...


@runtime_checkable
class WebSearcher(Protocol):
    """A web search engine: at most ``k`` results, best first; no match gives an empty list.
    Failures raise `FetchError` (or another `RetrieverError`)."""

    def search(self, query: str, k: int = 5) -> list[SearchResult]: ...
