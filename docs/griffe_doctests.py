"""Griffe extension for the API page: searchgym's docstrings hold doctests (``>>>`` lines and their
output), which Markdown would read as nested quotes; each run of them becomes a ``pycon`` block."""

from __future__ import annotations

import re

import griffe

_DOCTEST = re.compile(r"^( *)>>> .*?(?=^\s*$|\Z)", re.M | re.S)


class DoctestBlocks(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _DOCTEST.sub(_fenced, obj.docstring.value)


def _fenced(match: re.Match) -> str:
    indent = match.group(1)
    return f"{indent}```pycon\n{match.group(0).rstrip()}\n{indent}```\n"
