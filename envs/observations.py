"""Turning retrieved documents into observation text, and counting observation tokens.

A text's tokens are its words and punctuation marks (``\\w+|[^\\w\\s]``), but never fewer than
one per `CHARS_PER_TOKEN` characters: ``max(words and marks, ceil(characters / 6))``. The count
is model-free and stable across policies. Prose runs about 5 characters to a word or mark, so
it counts its words (no FictionalQA observation and none of 3,000 three-paragraph mini-wiki ones
counts differently at 512 tokens), while a long word, a URL or a run of spaces counts by its
length: a limit of ``n`` tokens also bounds the text to ``6 * n`` characters. Training code that
needs exact policy tokens counts them itself.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence

from searchgym.retrievers.base import Doc

CHARS_PER_TOKEN = 6
"""The most characters one counted token stands for: ``n`` tokens are at most ``6 * n`` characters."""
_TOKEN_RE = re.compile(r"\w+|[^\w\s]")
TRUNCATION_MARK = " …[truncated]"


def count_tokens(text: str) -> int:
    """Words and punctuation marks, and at least one token per `CHARS_PER_TOKEN` characters.

    >>> count_tokens("Doc 1(Title: Paris) Capital of France."), count_tokens("x" * 60)
    (11, 10)
    """
    return max(count_words(text), -(-len(text) // CHARS_PER_TOKEN))


def count_words(text: str) -> int:
    """Words and punctuation marks alone: `count_tokens` without its character bound.

    >>> count_words("x" * 60)
    1
    """
    return len(_TOKEN_RE.findall(text))


def prefix_end(text: str, max_tokens: int, start: int = 0) -> int:
    """Where the longest piece of ``text[start:]`` that counts at most ``max_tokens`` tokens ends
    (``len(text)`` when all of it fits): before its ``max_tokens + 1``-th word or mark and within
    ``CHARS_PER_TOKEN * max_tokens`` characters. When the character bound cuts a word, the piece
    ends at the last space instead, unless that would drop more than half of it: only a word
    longer than half a piece is split.

    >>> prefix_end("a b c d", 2), prefix_end("a b c d", 9), prefix_end("a b c d", 1, start=2)
    (4, 7, 4)
    >>> prefix_end("x" * 12 + " " + "y" * 10, 3), prefix_end("a b " + "x" * 20, 3)
    (12, 18)
    """
    end = min(len(text), start + CHARS_PER_TOKEN * max_tokens)
    nxt = next(itertools.islice(_TOKEN_RE.finditer(text, start, end), max_tokens, None), None)
    if nxt is not None:
        return nxt.start()
    if end in (start, len(text)) or text[end - 1].isspace() or text[end].isspace():
        return end
    space = max(text.rfind(" ", start, end), text.rfind("\t", start, end))
    return space if space > start + (end - start) // 2 else end


def truncate_tokens(text: str, max_tokens: int) -> str:
    """Cut ``text`` after ``max_tokens`` tokens (`count_tokens`), marking the cut: what is kept
    counts at most ``max_tokens`` tokens, so it has at most ``CHARS_PER_TOKEN * max_tokens``
    characters, followed by `TRUNCATION_MARK`.

    >>> truncate_tokens("a b c d", 2), truncate_tokens("x" * 100, 2)
    ('a b …[truncated]', 'xxxxxxxxxxxx …[truncated]')
    """
    if len(text) <= max_tokens or count_tokens(text) <= max_tokens:
        return text
    return text[: prefix_end(text, max_tokens)].rstrip() + TRUNCATION_MARK


def format_docs(docs: Sequence[Doc]) -> str:
    """Search-R1's layout: ``Doc i(Title: t) text``, one per line.

    >>> format_docs([Doc("1", "Paris", "Capital of France.")])
    'Doc 1(Title: Paris) Capital of France.'
    """
    if not docs:
        return "No results found."
    return "\n".join(f"Doc {i}(Title: {d.title}) {d.text}" for i, d in enumerate(docs, 1))
