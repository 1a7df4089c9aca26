"""Corpus files: JSONL with one document per line.

Two row shapes are read: ours, ``{"id", "title", "text"}``, and the Search-R1 / FlashRAG /
pyserini shape ``{"id", "contents"}`` whose first line is the title (optionally in double quotes).
Files are written in our shape.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from searchgym.errors import ConfigError, DataNotFoundError
from searchgym.files import replace_atomically
from searchgym.retrievers.base import Doc


def doc_from_row(row: dict) -> Doc:
    """Parse one corpus row in either accepted shape.

    >>> doc_from_row({"id": 7, "contents": '"Paris"\\nCapital of France.'})
    Doc(id='7', title='Paris', text='Capital of France.', score=0.0)
    """
    if "id" not in row:
        raise ConfigError(f"corpus row has no 'id' field: {sorted(row)}")
    if "contents" in row and "text" not in row:
        title, _, text = str(row["contents"]).partition("\n")
        title = title.strip()
        if len(title) >= 2 and title[0] == title[-1] == '"':
            title = title[1:-1]
        return Doc(id=str(row["id"]), title=title, text=text.strip())
    if "text" not in row:
        raise ConfigError(
            f"corpus row {row['id']!r} has neither 'text' nor 'contents'; "
            'rows must be {"id", "title", "text"} or {"id", "contents"}'
        )
    return Doc(id=str(row["id"]), title=str(row.get("title", "")), text=str(row["text"]))


def read_corpus(path: str | os.PathLike) -> Iterator[Doc]:
    """Stream the documents of a JSONL corpus file, in file order."""
    path = Path(path)
    if not path.is_file():
        raise DataNotFoundError(f"corpus file {path} does not exist")
    with path.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise ConfigError(f"{path}:{lineno}: not valid JSON ({e.msg})") from e
            if not isinstance(row, dict):
                raise ConfigError(f"{path}:{lineno}: expected a JSON object, got {type(row).__name__}")
            try:
                yield doc_from_row(row)
            except ConfigError as e:
                raise ConfigError(f"{path}:{lineno}: {e}") from None


def write_corpus(docs: Iterable[Doc], path: str | os.PathLike) -> int:
    """Write documents as ``{"id", "title", "text"}`` JSONL, atomically; returns the count."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with replace_atomically(path) as f:
        for doc in docs:
            row = {"id": doc.id, "title": doc.title, "text": doc.text}
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
            n += 1
    return n
