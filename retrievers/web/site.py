"""An offline website as a web: `FileSource` serves its files by URL, `SiteSearch` searches it.

`FileSource` maps URLs under a base URL to files under a folder, the way a static web server
does, without a server: ``https://fictopedia.example/wiki/X.html`` reads ``root/wiki/X.html``.
`SiteSearch` is a search engine over the site's pages: BM25 over their extracted text, results
with the page title, its absolute URL and a snippet of the best-matching sentences. Pages that
say ``<meta name="robots" content="noindex">`` are left out, as search engines do.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, unquote, urljoin, urlsplit

from tqdm.auto import tqdm

from searchgym.errors import ConfigError
from searchgym.files import replace_atomically
from searchgym.retrievers.base import Doc
from searchgym.retrievers.bm25 import BM25
from searchgym.retrievers.web.extract import extract
from searchgym.retrievers.web.page import FetchError, RawPage, SearchResult

DEFAULT_BASE_URL = "https://fictopedia.example/"
SNIPPET_CHARS = 200
_CACHE_FORMAT = 2  # bump when extraction changes, so cached page texts are made again
CONTENT_TYPES = {
    ".html": "text/html",
    ".htm": "text/html",
    ".txt": "text/plain; charset=utf-8",
    ".css": "text/css",
    ".js": "text/javascript",
    ".json": "application/json",
}
_NOINDEX = re.compile(rb"<meta[^>]{0,200}name=[\"']?robots[\"']?[^>]{0,200}noindex", re.I)
_LINK_MARK = re.compile(r" \[\d+\]")
_WORD = re.compile(r"\w+")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_STOPWORDS = frozenset(
    "a an and are as at be by for from has in is it its of on or that the to was were what when "  # noqa: SIM905
    "where which who with".split()
)


class FileSource:
    """A `PageSource` over the files of ``root_dir``, served at ``base_url``.

    A URL ending in ``/`` reads its folder's ``index.html``; a query string is ignored. URLs
    outside ``base_url``, paths that escape the folder (``..``, symbolic links) and missing
    files raise `FetchError` ("404 Not Found" for the last two, as a server would say).
    """

    def __init__(self, root_dir: str | os.PathLike, base_url: str = DEFAULT_BASE_URL) -> None:
        self.root = Path(root_dir).expanduser().resolve()
        if not self.root.is_dir():
            raise ConfigError(f"site folder {root_dir} does not exist")
        self.base_url = base_url if base_url.endswith("/") else base_url + "/"
        parts = urlsplit(self.base_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ConfigError(f"base_url must be an http(s) URL such as {DEFAULT_BASE_URL}, got {base_url!r}")

    def get(self, url: str) -> RawPage:
        path = self.path(url)
        try:
            body = path.read_bytes()
        except OSError as e:
            raise FetchError(f"{url} could not be read ({e.strerror})") from e
        return RawPage(url, body, CONTENT_TYPES.get(path.suffix.lower(), "application/octet-stream"))

    def path(self, url: str) -> Path:
        """The file behind ``url``; `FetchError` if there is none (see the class docstring)."""
        parts = urlsplit(url)
        base = urlsplit(self.base_url)
        if (parts.scheme, parts.netloc.lower()) != (base.scheme, base.netloc.lower()) or not (
            parts.path or "/"
        ).startswith(base.path):
            raise FetchError(f"{url} is not on this site; its pages are under {self.base_url}")
        rel = unquote(parts.path or "/")[len(base.path) :]
        if rel == "" or rel.endswith("/"):
            rel += "index.html"
        if "\x00" in rel:
            raise FetchError(f"404 Not Found: {url}")
        try:
            path = (self.root / rel).resolve()
            found = path.is_relative_to(self.root) and path.is_file()
        except (OSError, ValueError) as e:  # a name too long for the file system, a lone surrogate
            raise FetchError(f"404 Not Found: {url} ({type(e).__name__})") from e
        if not found:
            raise FetchError(f"404 Not Found: {url}")
        return path

    def url(self, rel_path: str) -> str:
        """The URL of a root-relative (percent-encoded) path."""
        return urljoin(self.base_url, rel_path)

    def close(self) -> None:
        """Nothing to release; here so every source can be closed alike."""


@dataclass(frozen=True)
class _Indexed:
    bm25: BM25
    texts: dict[str, tuple[str, str]]  # path -> (title, text)


class SiteSearch:
    """A `WebSearcher` over a site's pages, at most ``k`` results, best first.

    Build it with `from_dir`; results carry absolute URLs under ``base_url``. `rebased` gives the
    same index at another base URL (a loopback server's port), without building it again.
    """

    def __init__(self, pages: Sequence[tuple[str, str, str]], base_url: str = DEFAULT_BASE_URL) -> None:
        """``pages``: ``(root-relative, percent-encoded path, title, text)`` per page."""
        if not pages:
            raise ConfigError("SiteSearch needs at least one page to index")
        docs = [Doc(path, title, _LINK_MARK.sub("", text)) for path, title, text in pages]
        self._index = _Indexed(BM25.build(docs), {d.id: (d.title, d.text) for d in docs})
        self.base_url = base_url

    @classmethod
    def from_dir(
        cls, root_dir: str | os.PathLike, base_url: str = DEFAULT_BASE_URL, *, show_progress: bool = False
    ) -> SiteSearch:
        """Index every ``.html`` page under ``root_dir`` that does not say noindex."""
        source = FileSource(root_dir, base_url)
        files = sorted(
            p for p in source.root.rglob("*.html") if p.is_file() and p.resolve().is_relative_to(source.root)
        )
        listing = f"{_CACHE_FORMAT}\n" + "\n".join(
            f"{p.relative_to(source.root)}\t{p.stat().st_size}\t{p.stat().st_mtime_ns}" for p in files
        )
        cache = source.root / f".search-pages-{hashlib.sha256(listing.encode()).hexdigest()[:16]}.jsonl"
        if cache.is_file():
            with cache.open(encoding="utf-8") as f:
                return cls([tuple(json.loads(line)) for line in f], base_url)
        pages = []
        for path in tqdm(files, desc="indexing pages", disable=not show_progress):
            body = path.read_bytes()
            if _NOINDEX.search(body[:4096]):
                continue
            rel = quote(path.relative_to(source.root).as_posix())
            page = extract(RawPage(source.url(rel), body, "text/html"))
            pages.append((rel, page.title, page.text))
        _save_pages(cache, pages)
        return cls(pages, base_url)

    def rebased(self, base_url: str) -> SiteSearch:
        """The same index, with result URLs under ``base_url``."""
        other = object.__new__(SiteSearch)
        other._index, other.base_url = self._index, base_url
        return other

    def search(self, query: str, k: int = 5) -> list[SearchResult]:
        terms = _terms(query)
        results = []
        for doc in self._index.bm25.search(query, k):
            title, text = self._index.texts[doc.id]
            cues = terms - _terms(title) or terms  # the page's own name is in every sentence
            results.append(
                SearchResult(title, urljoin(self.base_url, doc.id), snippet(text, cues), doc.score)
            )
        return results


def _save_pages(path: Path, pages: list[tuple[str, str, str]]) -> None:
    """Keep extracted pages next to the site, so a later process skips extraction; a folder
    that cannot be written just goes without."""
    try:
        with replace_atomically(path) as f:
            f.writelines(json.dumps(p, ensure_ascii=False) + "\n" for p in pages)
    except OSError:
        pass


def _terms(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOPWORDS}


def snippet(text: str, terms: set[str], max_chars: int = SNIPPET_CHARS) -> str:
    """The sentence of ``text`` sharing most of ``terms`` (prose before table rows and short
    lines, headings never), then the sentences after it on its line while they fit, cut at a word near
    ``max_chars``.

    >>> snippet("# Orvo\\nMayor | Ada\\nOrvo is a town. It has a port. Its mayor is Ada.", {"mayor"}, 40)
    'Its mayor is Ada.'
    """
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    best_key, best = None, ""
    for line in lines:
        sentences = _SENTENCE.split(line)
        for i, sentence in enumerate(sentences):
            key = (len(terms & _terms(sentence)), " | " not in sentence, len(sentence.split()) >= 6)
            if best_key is None or key > best_key:
                best_key = key
                best = " ".join(sentences[i:])
    if len(best) > max_chars:
        best = best[:max_chars].rsplit(" ", 1)[0] + " …"
    return best
