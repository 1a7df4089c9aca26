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
    if isinstance(row["id"], bool) or not isinstance(row["id"], str | int) or not str(row["id"]).strip():
        raise ConfigError(f"corpus row has id {row['id']!r}; ids must be non-empty strings or integers")
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


def read_corpus(path: str | os.PathLike, *, unique_ids: bool = True) -> Iterator[Doc]:
    """Stream the documents of a JSONL corpus file, in file order. Any row that cannot be read
    (not UTF-8, not JSON, nested too deeply, a number of thousands of digits, no id or text, an
    empty or null id, an id seen before with ``unique_ids``) is a `ConfigError` naming its line;
    a file without documents is one too. ``unique_ids`` False leaves duplicates to the caller
    (a `DocStore` finds them without holding every id in a dict)."""
    path = Path(path)
    if not path.is_file():
        raise DataNotFoundError(f"corpus file {path} does not exist")
    seen: dict[str, int] = {}
    n_docs = 0
    with path.open(encoding="utf-8") as f:
        lineno = 0
        while True:
            try:
                line = f.readline()
            except UnicodeDecodeError as e:
                raise ConfigError(
                    f"{path}:{lineno + 1}: not UTF-8 text (byte {e.start}); save it as UTF-8"
                ) from None
            if not line:
                break
            lineno += 1
            if not line.strip():
                continue
            doc = _parse_line(line, f"{path}:{lineno}")
            if unique_ids:
                first = seen.setdefault(doc.id, lineno)
                if first != lineno:
                    raise ConfigError(
                        f"{path}:{lineno}: id {doc.id!r} is already on line {first}; ids must be unique"
                    )
            n_docs += 1
            yield doc
    if not n_docs:
        raise ConfigError(f"{path} is an empty corpus (no documents); write one JSON object per line")


def _parse_line(line: str, where: str) -> Doc:
    try:
        row = json.loads(line)
    except json.JSONDecodeError as e:
        raise ConfigError(f"{where}: not valid JSON ({e.msg})") from None
    except RecursionError:
        raise ConfigError(f"{where}: the JSON is nested too deeply") from None
    except ValueError as e:  # an integer longer than Python converts
        raise ConfigError(f"{where}: {' '.join(str(e).split(';')[0].split())}") from None
    if not isinstance(row, dict):
        raise ConfigError(f"{where}: expected a JSON object, got {type(row).__name__}")
    try:
        return doc_from_row(row)
    except ConfigError as e:
        raise ConfigError(f"{where}: {e}") from None


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
