"""The web tools and how their results read: search results, pages split into numbered parts,
and lines found on a page.

Long pages are never cut: `paginate` splits a page's text into parts of at most ``page_tokens``
tokens as `searchgym.envs.observations.count_tokens` counts them, so of at most
``6 * page_tokens`` characters (at line ends where it can). ``open`` shows part 1 and a last
line naming the URL that shows the next part (the same URL with ``#page=2``), so an agent reads
on with the tool it already has. ``find`` searches every part of the open page and says which
part each match is on.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Iterator, Sequence
from urllib.parse import urldefrag

from searchgym.envs.observations import (
    CHARS_PER_TOKEN,
    count_tokens,
    count_words,
    prefix_end,
    truncate_tokens,
)
from searchgym.envs.tools import ANSWER, SEARCH, Param, Tool
from searchgym.retrievers.web import Page, SearchResult

WEB_SEARCH = dataclasses.replace(
    SEARCH, description="Search the web. Returns the top results, each with its title, URL and a snippet."
)
OPEN = Tool(
    "open",
    "Open a web page by its URL and read its text; links are marked [n]. A long page is split "
    "into parts: add #page=2 to the URL to read part 2, and so on.",
    (Param("url", "The page's URL, e.g. from a search result."),),
    example="https://en.wikipedia.org/wiki/Paris",
)
FOLLOW = Tool(
    "follow",
    "Open the link marked [n] on the page you are reading.",
    (Param("link", "The link's number n, e.g. 3."),),
    example="3",
)
FIND = Tool(
    "find",
    "Find text on the page you are reading: shows every line that contains it, with its part number.",
    (Param("text", "The text to look for (case does not matter)."),),
    example="population",
)
WEB_TOOLS = (WEB_SEARCH, OPEN, FOLLOW, FIND, ANSWER)
MAX_FIND_LINES = 20
MAX_RESULT_TOKENS = 100
"""A search result's title and its snippet are each cut to this many tokens (600 characters)."""
_PAGE_FRAGMENT = re.compile(r"^page=(\d+)$")
_RESULT = re.compile(r"(?:^|>)\d+\. ([^\n]*)\nURL: ([^\s<]+)\n?(.*?)(?=\n\n\d+\. |</|\Z)", re.M | re.S)


def format_results(results: Sequence[SearchResult]) -> str:
    """Numbered results: title, URL, snippet (title and snippet cut to `MAX_RESULT_TOKENS`).

    >>> print(format_results([SearchResult("Paris", "https://w.test/Paris", "Capital of France.")]))
    1. Paris
    URL: https://w.test/Paris
    Capital of France.
    """
    if not results:
        return "No results found."
    short = functools.partial(truncate_tokens, max_tokens=MAX_RESULT_TOKENS)
    blocks = (
        f"{i}. {short(r.title)}\nURL: {r.url}\n{short(r.snippet)}".rstrip() for i, r in enumerate(results, 1)
    )
    return "\n\n".join(blocks)


def parse_results(observation: str) -> list[SearchResult]:
    r"""The results `format_results` wrote into ``observation``, in rank order (the inverse).

    >>> parse_results("<information>1. Paris\nURL: https://w.test/Paris\nCapital.</information>")
    [SearchResult(title='Paris', url='https://w.test/Paris', snippet='Capital.', score=None)]
    """
    return [SearchResult(title, url, snippet.strip()) for title, url, snippet in _RESULT.findall(observation)]


def split_page_url(url: str) -> tuple[str, int | None]:
    """The URL without its fragment, and the part number a ``#page=N`` fragment asks for.

    >>> split_page_url("https://w.test/a#page=2"), split_page_url("https://w.test/a#History")
    (('https://w.test/a', 2), ('https://w.test/a', None))
    """
    base, fragment = urldefrag(url.strip())
    match = _PAGE_FRAGMENT.match(fragment)
    return base, int(match.group(1)) if match else None


def paginate(text: str, page_tokens: int) -> list[str]:
    """``text`` in parts that count at most ``page_tokens`` tokens (`count_tokens`), so of at
    most ``CHARS_PER_TOKEN * page_tokens`` characters: split at line ends, and inside a line only
    when the line alone is longer, between words where it can (`prefix_end`). Every word comes
    back in order from the parts; only a word longer than half a part is split across parts.

    >>> paginate("a b\\nc d\\ne", 4), [len(part) for part in paginate("x" * 150, 20)]
    (['a b\\nc d', 'e'], [120, 30])
    """
    max_chars = CHARS_PER_TOKEN * page_tokens
    parts: list[str] = []
    lines: list[str] = []
    words = chars = 0
    for line in _pieces(text, page_tokens):
        n = count_words(line)
        if lines and (words + n > page_tokens or chars + 1 + len(line) > max_chars):
            parts.append("\n".join(lines))
            lines, words, chars = [], 0, 0
        chars += len(line) + (1 if lines else 0)  # the length of the lines joined by line ends
        words += n
        lines.append(line)
    if lines:
        parts.append("\n".join(lines))
    return [p for p in parts if p.strip()] or [""]


def _pieces(text: str, page_tokens: int) -> Iterator[str]:
    """The lines of ``text``, each line that alone counts over ``page_tokens`` tokens in pieces
    that count at most that, with the spaces at each split dropped."""
    for line in text.splitlines():
        if count_tokens(line) <= page_tokens:
            yield line
            continue
        start = 0
        while start < len(line):
            end = prefix_end(line, page_tokens, start)
            if piece := line[start:end].strip():
                yield piece
            start = end


def format_page(page: Page, parts: Sequence[str], number: int) -> str:
    """Part ``number`` (from 1) of an opened page, with a header and, when there are more parts,
    a last line saying how to read the next one."""
    url = urldefrag(page.url)[0]
    total = len(parts)
    header = f"Title: {page.title}\nURL: {url}" + (f"\nPart {number} of {total}" if total > 1 else "")
    footer = ""
    if number < total:
        footer = f"\n\n[Part {number} of {total}. To read part {number + 1}, open {url}#page={number + 1}]"
    elif total > 1:
        footer = f"\n\n[Part {total} of {total}: the end of the page.]"
    return f"{header}\n\n{parts[number - 1]}{footer}"


def find_lines(parts: Sequence[str], text: str, limit: int = MAX_FIND_LINES) -> str:
    """The lines of ``parts`` that contain ``text`` (case-insensitive), each with its part.

    >>> print(find_lines(["Born | 1849", "Died | 1901\\nborn again"], "born"))
    2 lines contain 'born':
    (part 1) Born | 1849
    (part 2) born again
    """
    needle = text.casefold()
    hits = [
        f"(part {i}) {line}"
        for i, part in enumerate(parts, 1)
        for line in part.splitlines()
        if needle in line.casefold()
    ]
    if not hits:
        return f"No line of this page contains {text!r}."
    more = f"\n… and {len(hits) - limit} more" if len(hits) > limit else ""
    noun = "line contains" if len(hits) == 1 else "lines contain"
    return f"{len(hits)} {noun} {text!r}:\n" + "\n".join(hits[:limit]) + more
