"""The fenced code blocks of the docs pages, for the tests that run them verbatim.

`test_doc_pages.py` checks that every block of every page is named in its ``BLOCKS`` by a test.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
_FENCE = re.compile(r"^```(\w+)[^\n]*\n(.*?)^```", re.M | re.S)


def page_blocks(page: str) -> list[tuple[str, str]]:
    """``(language, code)`` of each fenced block of ``docs/PAGE``, in order."""
    return _FENCE.findall((DOCS / page).read_text())


def doc_block(page: str, language: str, index: int = 0) -> str:
    """The code of the ``index``-th ``language`` block of ``docs/PAGE``."""
    return [code for lang, code in page_blocks(page) if lang == language][index]
