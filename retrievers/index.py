"""Build, save and open indexes of any kind."""

from __future__ import annotations

import json
import os
import secrets
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from searchgym.errors import ConfigError, DataNotFoundError
from searchgym.files import check_writable_dir, replace_atomically
from searchgym.registry import RETRIEVERS
from searchgym.retrievers.base import Retriever
from searchgym.retrievers.corpus import read_corpus

META_FILE = "searchgym.json"
"""Describes a saved index; its ``kind`` names, in `searchgym.registry.RETRIEVERS`, the class whose
``load(directory)`` opens it."""
# what builds of every kind write in an index directory (dense builds resume from theirs)
_INDEX_FILES = {
    META_FILE,
    "docs.jsonl",
    ".docs.jsonl.tmp",
    "docs.offsets.npy",
    "docs.ids.npy",
    "embeddings",
    "index.faiss",
    "bm25s",
    "lucene",
    "cache-key.json",
}


def write_meta(directory: str | os.PathLike, meta: dict) -> None:
    """Describe a saved index (its ``kind`` first) in ``directory/searchgym.json``, with the
    manifest: the size of every other file in ``directory``. Call it last, once every file of
    the index is written; a directory whose manifest is missing or does not match is refused."""
    directory = Path(directory)
    files = {
        path.relative_to(directory).as_posix(): path.stat().st_size
        for path in sorted(directory.rglob("*"))
        if path.is_file() and path.name != META_FILE
    }
    text = json.dumps({**meta, "files": files}, indent=2, ensure_ascii=False) + "\n"
    with replace_atomically(directory / META_FILE) as f:
        f.write(text)


def read_meta(directory: str | os.PathLike, kind: str | None = None, build_hint: str = "") -> dict:
    """The description of the index in ``directory``; with ``kind``, it must be of that kind.
    Every file its manifest lists must be there with the size it had when the index was built
    (metadata written before manifests existed has no list and is taken as it is).
    ``build_hint`` says how to build one when there is none."""
    directory = Path(directory)
    hint = (
        build_hint or f"searchgym index build --corpus CORPUS.jsonl --kind {kind or 'bm25'} --out {directory}"
    )
    path = directory / META_FILE
    if not path.is_file():
        what = f"{kind} index" if kind else "index"
        raise DataNotFoundError(
            f"{directory} holds no complete searchgym {what} (no {META_FILE}); build one with {hint}"
        )
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise DataNotFoundError(f"{path} is not valid JSON ({e}); rebuild the index with {hint}") from e
    if kind is not None and meta.get("kind") != kind:
        raise DataNotFoundError(f"{directory} holds a {meta.get('kind')!r} index, not {kind!r}")
    for name, size in meta.get("files", {}).items():
        file = directory / name
        if not file.is_file() or file.stat().st_size != size:
            why = "is missing" if not file.is_file() else f"is {file.stat().st_size} bytes, not {size}"
            raise DataNotFoundError(
                f"{directory} is an incomplete or altered index ({name} {why}); rebuild it with {hint}"
            )
    return meta


def check_out_dir(out: str | os.PathLike) -> Path:
    """``out`` as a place to save an index: new, empty, or an index (complete or interrupted)
    that the new one replaces. Anything else is a `ConfigError` raised before any work."""
    out = check_writable_dir(out, "index directory")
    if out.is_dir() and any(out.iterdir()) and not _is_index_dir(out):
        raise ConfigError(
            f"{out} already holds files and no searchgym index; choose a new or empty directory"
        )
    return out


def _is_index_dir(directory: Path) -> bool:
    """Whether ``directory`` holds an index, or what an interrupted build left there."""
    return (directory / META_FILE).is_file() or all(p.name in _INDEX_FILES for p in directory.iterdir())


@contextmanager
def staged(directory: str | os.PathLike) -> Iterator[Path]:
    """A new, empty sibling of ``directory`` to save an index into. When the block ends cleanly
    the index there must be complete (`read_meta`); it then takes ``directory``'s place, the old
    one moved aside first and deleted after. If the block raises, the sibling is deleted and
    ``directory`` stays as it was: an index is replaced whole or not at all."""
    directory = Path(directory)
    check_out_dir(directory)
    directory.parent.mkdir(parents=True, exist_ok=True)
    _remove_leftovers(directory)
    tmp = directory.with_name(f".{directory.name}.building-{os.getpid()}-{secrets.token_hex(4)}")
    tmp.mkdir()  # not mkdtemp: the index keeps the umask's permissions
    try:
        yield tmp
        read_meta(tmp)
        replace_dir(tmp, directory)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _remove_leftovers(directory: Path) -> None:
    """Delete what interrupted saves of ``directory`` left beside it: replaced indexes not yet
    deleted, and unfinished ones whose process is gone."""
    for path in directory.parent.glob(f".{directory.name}.*-*-*"):
        kind, pid = path.name[len(directory.name) + 2 :].split("-")[:2]
        if kind == "old" or (kind == "building" and pid.isdigit() and not _alive(int(pid))):
            shutil.rmtree(path, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, under another user
        pass
    return True


def replace_dir(new: Path, directory: Path) -> None:
    """Rename ``new`` to ``directory``, moving an existing ``directory`` aside first (and
    deleting it after). In between, ``directory`` is absent: readers find no index, never half of one."""
    old = directory.with_name(f".{directory.name}.old-{os.getpid()}-{secrets.token_hex(4)}")
    try:
        if directory.exists():
            os.replace(directory, old)
        os.replace(new, directory)
    except BaseException:  # interrupted between the renames: the old index goes back
        if old.exists() and not directory.exists():
            os.replace(old, directory)
        raise
    if old.exists():
        shutil.rmtree(old, ignore_errors=True)


def load_index(directory: str | os.PathLike, **kwargs) -> Retriever:
    """The retriever saved in ``directory``, whatever its kind (``searchgym.json`` says)."""
    kind = read_meta(directory).get("kind")
    if kind not in RETRIEVERS:
        raise DataNotFoundError(
            f"{directory} holds an index of unknown kind {kind!r}; known: {RETRIEVERS.names()} (a plug-in's "
            "kind needs its package installed, or --import of the module that registers it)"
        )
    return RETRIEVERS.resolve(kind).load(directory, **kwargs)


def build_index(
    corpus: str | os.PathLike, kind: str, out: str | os.PathLike, *, show_progress: bool = False, **options
) -> Retriever:
    """Build an index of ``kind`` from a JSONL corpus, save it to ``out`` and return it. The
    new index replaces one already in ``out`` whole (see `staged`), or not at all.
    ``options`` go to the backend's ``build``, or to its ``build_streaming`` where it has one
    (dense: ``encoder``, ``index``, ``batch_size``, ``shard_size``, ``keep_embeddings``)."""
    backend = RETRIEVERS.resolve(kind)  # an unknown kind suggests the closest
    check_out_dir(out)
    if hasattr(backend, "build_streaming"):
        return backend.build_streaming(corpus, out, show_progress=show_progress, **options)
    built = backend.build(read_corpus(corpus), show_progress=show_progress, **options)
    built.save(out)
    return built
