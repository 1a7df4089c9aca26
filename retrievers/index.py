"""Build retrievers of any registered kind; save and open indexes of any kind.

A retriever kind (`RetrieverKind`) is registered by name in `searchgym.registry.RETRIEVERS`
(`searchgym.register_retriever`); envs build it from documents (``backend=NAME``), and an index
kind is also built from a corpus file into a directory (``searchgym index build --kind NAME``),
opened from there and served.
"""

from __future__ import annotations

import functools
import inspect
import json
import os
import secrets
import shutil
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

from searchgym.errors import ConfigError, DataNotFoundError
from searchgym.files import check_writable_dir, replace_atomically
from searchgym.registry import RETRIEVERS
from searchgym.retrievers.base import Doc, Retriever
from searchgym.retrievers.corpus import read_corpus


class RetrieverKind(Protocol):
    """What `searchgym.register_retriever` registers, usually a retriever class.

    ``build`` makes a retriever from documents, taking the options the kind is registered with
    and those given; it gets ``show_progress`` and ``parts`` where it names them. ``parts(KIND,
    **options)`` is the retriever of another kind over the same documents: a kind made of others
    (``hybrid``, ``rerank``) asks for them there, so that an env shares them with its other envs.

    An *index kind* has also ``load(directory, **options)`` and retrievers that ``save(directory)``
    (see `write_meta`), and may have ``build_streaming(corpus_file, out, **options)`` to build from a
    corpus file straight into a directory. Envs build one with ``build_streaming`` (``dense``,
    ``lucene``) once into their cache directory, and open it from there in later processes; they
    build the other kinds in memory, once per process.
    """

    def build(self, docs: Iterable[Doc], **options: Any) -> Retriever: ...


Parts = Callable[..., Retriever]
"""``parts(kind, **options)``: the retriever of another kind over the same documents."""


def is_index_kind(kind: Any) -> bool:
    """Whether ``kind`` saves as an index: it loads one and its retrievers save one.

    >>> from searchgym.retrievers import BM25, Hybrid
    >>> is_index_kind(BM25), is_index_kind(Hybrid)
    (True, False)
    """
    return callable(getattr(kind, "load", None)) and callable(getattr(kind, "save", None))


def index_kinds() -> list[str]:
    """The registered kinds that save as an index (importing each; for messages, not start-up)."""
    found = []
    for name in RETRIEVERS.names():
        try:
            kind = RETRIEVERS.resolve(name)
        except (ConfigError, ImportError):  # a plug-in whose package is missing is no choice
            continue
        if is_index_kind(kind):
            found.append(name)
    return found


def names_parameter(fn: Callable[..., Any], parameter: str) -> bool:
    """Whether ``fn`` has a parameter named ``parameter`` (one ``**kwargs`` would swallow is not).

    >>> names_parameter(lambda docs, show_progress=False: None, "show_progress")
    True
    >>> names_parameter(lambda docs, **options: None, "show_progress")
    False
    """
    try:
        found = inspect.signature(fn).parameters.get(parameter)
    except (TypeError, ValueError):  # a builtin without a signature
        return False
    return found is not None and found.kind not in (found.VAR_POSITIONAL, found.VAR_KEYWORD)


def build_retriever(
    kind: str,
    docs: Iterable[Doc],
    *,
    show_progress: bool = False,
    parts: Parts | None = None,
    **options: Any,
) -> Retriever:
    """A retriever of ``kind`` (a registered name or ``"module:attr"``) over ``docs``, built in
    memory with the options ``kind`` is registered with and ``options``. ``parts`` gives the
    retrievers a kind made of others asks for (default: built here the same way).

    >>> from searchgym.retrievers import Doc
    >>> bm25 = build_retriever("bm25", [Doc("a", "Paris", "capital of France")])
    >>> [d.id for d in bm25.search("France")]
    ['a']
    """
    spec = RETRIEVERS.spec(kind)  # an unknown kind suggests the closest
    backend = spec.load()
    if not callable(getattr(backend, "build", None)):
        raise ConfigError(
            f"retriever kind {kind!r} ({spec.entry_point!r}) has no build(docs, **options); "
            "register a class that has one (see searchgym.retrievers.index.RetrieverKind)"
        )
    docs = list(docs)
    extra: dict[str, Any] = {}
    if names_parameter(backend.build, "show_progress"):
        extra["show_progress"] = show_progress
    if names_parameter(backend.build, "parts"):
        extra["parts"] = parts or functools.partial(build_retriever, docs=docs, show_progress=show_progress)
    return backend.build(docs, **extra, **{**spec.kwargs, **options})


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
    if not isinstance(kind, str) or kind not in RETRIEVERS:
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
    ``options``, over those ``kind`` is registered with, go to the kind's ``build``, or to its
    ``build_streaming`` where it has one (dense: ``encoder``, ``index``, ``batch_size``,
    ``shard_size``, ``keep_embeddings``). A kind that does not save as an index is a `ConfigError`."""
    spec = RETRIEVERS.spec(kind)  # an unknown kind suggests the closest
    backend = spec.load()
    if not is_index_kind(backend):
        raise ConfigError(
            f"a {kind!r} retriever cannot be saved as an index: {getattr(backend, '__name__', backend)} has "
            "no load(directory), or its retrievers no save(directory). Build one of the index kinds "
            f"({', '.join(index_kinds())}); envs build {kind!r} retrievers themselves (backend={kind!r})"
        )
    check_out_dir(out)
    options = {**spec.kwargs, **options}
    if hasattr(backend, "build_streaming"):
        return backend.build_streaming(corpus, out, show_progress=show_progress, **options)
    built = build_retriever(kind, read_corpus(corpus), show_progress=show_progress, **options)
    built.save(out)
    return built
