"""The retrievers behind the registered envs, one per backend, built from a corpus once.

Backends: ``bm25`` (bm25s, built in memory), ``dense`` (an `Encoder` + exact FAISS search),
``hybrid`` (reciprocal-rank fusion of those two), ``lucene`` (pyserini, ``k1=0.9, b=0.4``) and
``rerank`` (BM25's top `RERANK_DEPTH` re-scored by a cross-encoder). Retrievers are memoised
per process, so the envs of one process share them; the slow ones to build (dense vectors, Lucene
indexes) are also saved under a cache directory (`default_cache_dir`) in a folder named after
the corpus and a digest of its contents and of the build settings (for dense, the encoder's
spec), so a later process opens them instead of building them again.
"""

from __future__ import annotations

import collections
import functools
import hashlib
import json
import logging
import os
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from searchgym.errors import ConfigError, DataNotFoundError
from searchgym.retrievers import BM25, Doc, Encoder, Hybrid, Retriever, read_corpus, write_corpus
from searchgym.retrievers.encoders import DEFAULT_ENCODER
from searchgym.retrievers.index import build_index, load_index

logger = logging.getLogger(__name__)

BACKENDS = ("bm25", "dense", "hybrid", "lucene", "rerank")
DEFAULT_RERANKER = "cross-encoder/ms-marco-MiniLM-L-6-v2"
RERANK_DEPTH = 50
LUCENE_PARAMS = {"k1": 0.9, "b": 0.4}
_USES_ENCODER = ("dense", "hybrid")
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
    from searchgym.tasks.world import load_world

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
    """The ``backend`` retriever over ``corpus``: from this process's memo, else from the cache
    directory, else built (and cached). ``encoder`` (dense, hybrid; default `DEFAULT_ENCODER`)
    and ``reranker`` (rerank; default `DEFAULT_RERANKER`) are model names or local directories;
    ``show_progress`` None shows building progress when stderr is a terminal."""
    if backend not in BACKENDS:
        raise ConfigError(f"unknown retrieval backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    if encoder is not None and backend not in _USES_ENCODER:
        raise ConfigError(f"encoder= applies to the {' and '.join(_USES_ENCODER)} backends, not {backend!r}")
    if reranker is not None and backend != "rerank":
        raise ConfigError(f"reranker= applies to the rerank backend, not {backend!r}")
    encoder = str(encoder) if encoder is not None else (DEFAULT_ENCODER if backend in _USES_ENCODER else None)
    reranker = str(reranker or DEFAULT_RERANKER) if backend == "rerank" else None
    cache = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    key = (backend, corpus, encoder, reranker, str(cache))
    if key in _memo:
        _memo.move_to_end(key)
        return _memo[key]
    progress = sys.stderr.isatty() if show_progress is None else show_progress
    if backend == "bm25":
        retriever: Retriever = BM25.build(corpus.docs)
    elif backend == "dense":
        retriever = _cached_dense(corpus, Encoder(encoder), cache, progress)
    elif backend == "lucene":
        retriever = _cached_index(
            corpus, "lucene", LUCENE_PARAMS, cache, progress, build=LUCENE_PARAMS, load={}
        )
    else:
        sub = {"cache_dir": cache, "show_progress": show_progress}
        bm25 = make_retriever("bm25", corpus, **sub)
        if backend == "hybrid":
            retriever = Hybrid([bm25, make_retriever("dense", corpus, encoder=encoder, **sub)])
        else:
            from searchgym.retrievers.rerank import Rerank

            retriever = Rerank(bm25, reranker, depth=RERANK_DEPTH)
    _memo[key] = retriever
    while len(_memo) > _MEMO_SIZE:
        _memo.popitem(last=False)
    return retriever


def _cached_dense(corpus: Corpus, encoder: Encoder, cache: Path, progress: bool) -> Retriever:
    settings = {"encoder": encoder.spec(), "index": "flat"}
    build = {"encoder": encoder, "index": "flat"}
    return _cached_index(corpus, "dense", settings, cache, progress, build=build, load={"encoder": encoder})


def _cached_index(
    corpus: Corpus, kind: str, settings: dict, cache: Path, progress: bool, *, build: dict, load: dict
) -> Retriever:
    """Open the ``kind`` index of ``corpus`` built with ``settings`` from ``cache``, building
    (with `build_index` options ``build``) and saving it first if it is not there; ``load`` are
    `load_index` options. The folder appears complete or not at all."""
    spec = json.dumps({"kind": kind, "corpus": corpus.fingerprint, **settings}, sort_keys=True, default=str)
    folder = cache / f"{corpus.name}-{kind}-{hashlib.sha256(spec.encode()).hexdigest()[:16]}"
    if not folder.is_dir():
        cache.mkdir(parents=True, exist_ok=True)
        logger.info("building the %s index of %s in %s (once; later runs open it)", kind, corpus, folder)
        work = Path(tempfile.mkdtemp(dir=cache, prefix=f".{folder.name}."))
        try:
            write_corpus(corpus.docs, work / "corpus.jsonl")
            build_index(work / "corpus.jsonl", kind, work / "index", show_progress=progress, **build).close()
            (work / "index" / "cache-key.json").write_text(spec + "\n", encoding="utf-8")
            try:
                os.rename(work / "index", folder)
            except OSError:
                if not folder.is_dir():  # else another process finished first: use its index
                    raise
        finally:
            shutil.rmtree(work, ignore_errors=True)
    try:
        return load_index(folder, **load)
    except (DataNotFoundError, ConfigError) as e:
        raise DataNotFoundError(
            f"the cached {kind} index {folder} cannot be opened ({e}); delete that folder and make "
            "the env again to rebuild it"
        ) from e
