"""Writing a file so that readers see the old version or the new one, never half of one, and
the file name an agent's episodes get. A leaf module: every layer may import it."""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from searchgym.errors import ConfigError


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
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes it 0600; keep what open() would give
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            yield f
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0)  # the only way to read it is to set it
    os.umask(mask)
    return mask


def check_writable_dir(path: str | os.PathLike, what: str = "the output directory") -> Path:
    """``path`` as a directory to write in, checked before any work: it is a directory or can
    be made one, and a file can be created there. Else a one-line `ConfigError` naming
    ``what`` (e.g. ``"--out"``). Nothing is left behind.

    >>> import tempfile
    >>> check_writable_dir(tempfile.mkdtemp()).is_dir()
    True
    """
    path = Path(path)
    existing = next(p for p in [path, *path.parents] if p.exists() or p == Path(p.anchor or "."))
    if not existing.is_dir():
        raise ConfigError(f"{what} {path}: {existing} is a file, not a directory; choose another path")
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as e:
        raise ConfigError(
            f"{what} {path}: cannot write in {existing} ({e.strerror}); choose a directory you can write"
        ) from None
    return path


def file_name(agent: str) -> str:
    """``hf:/ckpt/step-10`` -> ``hf_ckpt_step-10``: an agent's name as the name of its episodes'
    file (``searchgym eval`` and ``sweep`` write it, the viewer reads it).

    >>> file_name("hf:/ckpt/step-10")
    'hf_ckpt_step-10'
    """
    return re.sub(r"[^\w.-]+", "_", agent).strip("_")
