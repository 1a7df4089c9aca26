"""The retrievers behind the registered envs, one per backend, built from a corpus once.

An env's ``backend`` names a retriever kind of `searchgym.registry.RETRIEVERS` (or a
``"module:attr"``), the same names ``searchgym index build --kind`` takes; the built-in ones are
``bm25`` (bm25s, built in memory), ``dense`` (an `Encoder` + exact FAISS search), ``hybrid``
(reciprocal-rank fusion of those two), ``lucene`` (pyserini, ``k1=0.9, b=0.4``) and ``rerank``
(BM25's top 50 re-scored by a cross-encoder), and `searchgym.register_retriever` adds one.
Retrievers are memoised per process, so the envs of one process share them; the index kinds
built into a directory (``build_streaming``: dense vectors, Lucene indexes) are also saved under a
cache directory (`default_cache_dir`) in a folder named after the corpus and a digest of its
contents and of the build settings (for dense, the encoder's spec), so a later process opens them
instead of building them again.
"""

from __future__ import annotations

import collections
import functools
import hashlib
import inspect
import json
import logging
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from searchgym.errors import ConfigError, DataNotFoundError
from searchgym.registry import RETRIEVERS
from searchgym.retrievers import Doc, Encoder, Retriever, read_corpus, write_corpus
from searchgym.retrievers.index import build_index, build_retriever, is_index_kind, names_parameter
from searchgym.tasks.world import load_world

logger = logging.getLogger(__name__)

_MEMO_SIZE = 8


class Corpus:
    """A corpus held in memory, with a ``name`` for cache folders and a ``fingerprint`` (SHA-256
    of its documents) that keys everything built from it. Equal fingerprints are equal corpora."""

    def __init__(self, name: str, docs: Sequence[Doc]) -> None:
        if not docs:
            raise ConfigError(f"corpus {name!r} is empty")
        self.name = name
        self.docs = tuple(docs)
        digest = hashlib.sha256()
        for d in self.docs:
            digest.update(json.dumps([d.id, d.title, d.text], ensure_ascii=False).encode("utf-8") + b"\n")
        self.fingerprint = digest.hexdigest()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Corpus) and other.fingerprint == self.fingerprint

    def __hash__(self) -> int:
        return hash(self.fingerprint)

    def __repr__(self) -> str:
        return f"Corpus({self.name!r}, {len(self.docs)} docs, {self.fingerprint[:12]})"


@functools.lru_cache(maxsize=4)
def world_corpus(seed: int, n_passages: int) -> Corpus:
    """The passages of the generated world ``(seed, n_passages)``."""
    passages = load_world(seed=seed, n_passages=n_passages).passages
    return Corpus(f"fictional-s{seed}-n{n_passages}", [Doc(p["id"], p["title"], p["text"]) for p in passages])


def file_corpus(path: str | os.PathLike, name: str) -> Corpus:
    """The documents of a JSONL corpus file, read once per version of the file."""
    path = Path(path)
    if not path.is_file():
        raise DataNotFoundError(f"corpus file {path} does not exist")
    stat = path.stat()
    return _file_corpus(str(path.resolve()), stat.st_mtime_ns, stat.st_size, name)


@functools.lru_cache(maxsize=2)
def _file_corpus(path: str, mtime_ns: int, size: int, name: str) -> Corpus:
    return Corpus(name, list(read_corpus(path)))


def default_cache_dir() -> Path:
    """Where built indexes are kept: ``$XDG_CACHE_HOME/searchgym/indexes`` (``~/.cache`` when
    ``XDG_CACHE_HOME`` is unset)."""
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache).expanduser() / "searchgym" / "indexes"


_memo: collections.OrderedDict[tuple, Retriever] = collections.OrderedDict()


def clear_memo() -> None:
    """Forget the retrievers built in this process (the on-disk cache stays)."""
    _memo.clear()


def make_retriever(
    backend: str,
    corpus: Corpus,
    *,
    encoder: str | os.PathLike | None = None,
    reranker: str | os.PathLike | None = None,
    cache_dir: str | os.PathLike | None = None,
    show_progress: bool | None = None,
) -> Retriever:
    """The retriever of kind ``backend`` over ``corpus``: from this process's memo, else from the
    cache directory, else built (and cached, for an index kind with ``build_streaming``; see
    `searchgym.retrievers.index.RetrieverKind`). ``encoder`` (dense, hybrid; default
    `DEFAULT_ENCODER`) and ``reranker`` (rerank; default `DEFAULT_RERANKER`) are model names or
    local directories, for the kinds whose ``build`` takes them; ``show_progress`` None shows
    building progress when stderr is a terminal."""
    spec = RETRIEVERS.spec(backend)  # an unknown backend suggests the closest
    kind = spec.load()
    models = _model_options(backend, kind, encoder=encoder, reranker=reranker)
    cache = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    key = (backend, corpus, tuple(models.items()), str(cache))
    if key in _memo:
        _memo.move_to_end(key)
        return _memo[key]
    progress = sys.stderr.isatty() if show_progress is None else show_progress
    if is_index_kind(kind) and hasattr(kind, "build_streaming"):
        retriever = _cached_index(corpus, backend, kind, {**spec.kwargs, **models}, cache, progress)
    else:  # a kind made of others gets them from here: memoised, cached, shared with other envs
        parts = functools.partial(make_retriever, corpus=corpus, cache_dir=cache, show_progress=show_progress)
        retriever = build_retriever(backend, corpus.docs, show_progress=progress, parts=parts, **models)
    _memo[key] = retriever
    while len(_memo) > _MEMO_SIZE:
        _memo.popitem(last=False)
    return retriever


def _model_options(backend: str, kind: object, **given: str | os.PathLike | None) -> dict[str, str]:
    """The models ``given`` (None: not given) that ``kind``'s ``build`` takes, as text: each the one
    given or the build's default. A model given to a kind whose build does not take it is a
    `ConfigError` naming the backends that do."""
    build = getattr(kind, "build", None)
    options = {}
    for name, value in given.items():
        if build is not None and names_parameter(build, name):
            default = inspect.signature(build).parameters[name].default
            value = value if value is not None or default is inspect.Parameter.empty else default
            if value is not None:
                options[name] = str(value)
        elif value is not None:
            takers = [n for n in RETRIEVERS.names() if _builds_with(n, name)]
            backends = "backend" if len(takers) == 1 else "backends"
            raise ConfigError(f"{name}= applies to the {_and(takers)} {backends}, not {backend!r}")
    return options


def _builds_with(kind: str, option: str) -> bool:
    """Whether the ``build`` of the kind registered as ``kind`` takes ``option`` (for a message)."""
    try:
        build = getattr(RETRIEVERS.resolve(kind), "build", None)
    except (ConfigError, ImportError):  # a plug-in whose package is missing
        return False
    return build is not None and names_parameter(build, option)


def _and(names: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``.

    >>> _and(["dense"]), _and(["dense", "hybrid"]), _and(["a", "b", "c"])
    ('dense', 'dense and hybrid', 'a, b and c')
    """
    return " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)


def _cached_index(
    corpus: Corpus, backend: str, kind: object, options: dict, cache: Path, progress: bool
) -> Retriever:
    """Open the ``backend`` index of ``corpus`` built with ``options`` from ``cache``, building
    (`build_index`) and saving it first if it is not there. The folder appears complete or not at
    all."""
    build, load = dict(options), {}
    if isinstance(build.get("encoder"), str):  # one model for the build and the load, keyed by its spec
        build["encoder"] = load["encoder"] = Encoder(build["encoder"])
    settings = {name: v.spec() if isinstance(v, Encoder) else v for name, v in build.items()}
    spec = json.dumps(
        {"kind": backend, "corpus": corpus.fingerprint, **settings}, sort_keys=True, default=str
    )
    slug = re.sub(r"[^\w.-]+", "-", backend)  # a "module:attr" backend too
    folder = cache / f"{corpus.name}-{slug}-{hashlib.sha256(spec.encode()).hexdigest()[:16]}"
    if not folder.is_dir():
        cache.mkdir(parents=True, exist_ok=True)
        logger.info("building the %s index of %s in %s (once; later runs open it)", backend, corpus, folder)
        work = Path(tempfile.mkdtemp(dir=cache, prefix=f".{folder.name}."))
        try:
            write_corpus(corpus.docs, work / "corpus.jsonl")
            build_index(
                work / "corpus.jsonl", backend, work / "index", show_progress=progress, **build
            ).close()
            (work / "index" / "cache-key.json").write_text(spec + "\n", encoding="utf-8")
            try:
                os.rename(work / "index", folder)
            except OSError:
                if not folder.is_dir():  # else another process finished first: use its index
                    raise
        finally:
            shutil.rmtree(work, ignore_errors=True)
    try:
        return kind.load(folder, **load)  # type: ignore[attr-defined]
    except (DataNotFoundError, ConfigError) as e:
        raise DataNotFoundError(
            f"the cached {backend} index {folder} cannot be opened ({e}); delete that folder and make "
            "the env again to rebuild it"
        ) from e
