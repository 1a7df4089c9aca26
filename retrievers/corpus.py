"""Corpus files: JSONL with one document per line.

Two row shapes are read: ours, ``{"id", "title", "text"}``, and the Search-R1 / FlashRAG /
pyserini shape ``{"id", "contents"}`` whose first line is the title (optionally in double quotes).
Files are written in our shape.

Text that no backend can take, lone surrogates (JSON ``"\\ud800"``) and NULs, is replaced by
U+FFFD in titles and texts (`clean_doc`), with one warning per file that names the first such
line and counts them; in an id it is an error naming the line, since ids are matched exactly.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from searchgym.errors import ConfigError, DataNotFoundError
from searchgym.files import replace_atomically
from searchgym.retrievers.base import Doc, clean_text, is_clean

logger = logging.getLogger(__name__)


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


def clean_doc(doc: Doc) -> Doc:
    """``doc`` with `clean_text` title and text (``doc`` itself when they are clean); an id that
    is not clean is a `ConfigError`: ids are keys, matched exactly against qrels and evidence,
    and two ids that differ in such a character would become one.

    >>> clean_doc(Doc("7", "Paris", "Capital\\ud800 of France.")).text == "Capital\\ufffd of France."
    True
    """
    if not is_clean(doc.id):
        raise ConfigError(
            f"id {doc.id!r} holds a lone surrogate or a NUL; ids are matched exactly, so write it "
            "as valid Unicode without NULs"
        )
    if is_clean(doc.title) and is_clean(doc.text):
        return doc
    return Doc(doc.id, clean_text(doc.title), clean_text(doc.text), doc.score)


def read_corpus(path: str | os.PathLike, *, unique_ids: bool = True) -> Iterator[Doc]:
    """Stream the documents of a JSONL corpus file, in file order. Any row that cannot be read
    (not UTF-8, not JSON, nested too deeply, a number of thousands of digits, no id or text, an
    empty or null id, an id with a lone surrogate or NUL, an id seen before with ``unique_ids``)
    is a `ConfigError` naming its line; a file without documents is one too. Lone surrogates and
    NULs in titles and texts become U+FFFD (`clean_doc`), with a warning naming the first line
    and counting the documents. ``unique_ids`` False leaves duplicates to the caller (a
    `DocStore` finds them without holding every id in a dict)."""
    path = Path(path)
    if not path.is_file():
        raise DataNotFoundError(f"corpus file {path} does not exist")
    seen: dict[str, int] = {}
    n_docs = 0
    n_cleaned, cleaned = 0, []  # how many documents were cleaned, and the first lines
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
            where = f"{path}:{lineno}"
            doc = _parse_line(line, where)
            try:
                clean = clean_doc(doc)
            except ConfigError as e:
                raise ConfigError(f"{where}: {e}") from None
            if clean is not doc:
                n_cleaned += 1
                cleaned += [lineno] if len(cleaned) < 5 else []
                doc = clean
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
    if n_cleaned:
        lines = ", ".join(map(str, cleaned)) + (", ..." if n_cleaned > len(cleaned) else "")
        logger.warning(
            "%s:%d: lone surrogates or NULs replaced by U+FFFD in the title or text of %d document(s) "
            "(lines %s)",
            path,
            cleaned[0],
            n_cleaned,
            lines,
        )


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
