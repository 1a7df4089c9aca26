"""Turning retrieved documents into observation text, and counting observation tokens.

Tokens here are words and punctuation marks (``\\w+|[^\\w\\s]``): a model-free count that is
stable across policies. Training code that needs exact policy tokens counts them itself.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence

from searchgym.retrievers.base import Doc

_TOKEN_RE = re.compile(r"\w+|[^\w\s]")
TRUNCATION_MARK = " …[truncated]"


def count_tokens(text: str) -> int:
    """Words and punctuation marks.

    >>> count_tokens("Doc 1(Title: Paris) Capital of France.")
    11
    """
    return len(_TOKEN_RE.findall(text))


def truncate_tokens(text: str, max_tokens: int) -> str:
    """Cut ``text`` after ``max_tokens`` tokens, marking the cut.

    >>> truncate_tokens("a b c d", 2)
    'a b …[truncated]'
    """
    if len(text) <= max_tokens or count_tokens(text) <= max_tokens:
        return text
    cut = next(itertools.islice(_TOKEN_RE.finditer(text), max_tokens, None))
    return text[: cut.start()].rstrip() + TRUNCATION_MARK


def format_docs(docs: Sequence[Doc]) -> str:
    """Search-R1's layout: ``Doc i(Title: t) text``, one per line.

    >>> format_docs([Doc("1", "Paris", "Capital of France.")])
    'Doc 1(Title: Paris) Capital of France.'
    """
    if not docs:
        return "No results found."
    return "\n".join(f"Doc {i}(Title: {d.title}) {d.text}" for i, d in enumerate(docs, 1))
