"""Writing a file so that readers see the old version or the new one, never half of one.
A leaf module: every layer may import it."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO


@contextmanager
def replace_atomically(path: str | os.PathLike) -> Iterator[TextIO]:
    """A UTF-8 text file to write in place of ``path``. It is a temporary file beside ``path``
    that replaces it in one step when the block ends cleanly; if the block raises, the temporary
    file is removed and ``path`` stays as it was.

    >>> import pathlib, tempfile
    >>> target = pathlib.Path(tempfile.mkdtemp()) / "rows.jsonl"
    >>> with replace_atomically(target) as f:
    ...     _ = f.write("one\\n")
    >>> target.read_text()
    'one\\n'
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            yield f
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
