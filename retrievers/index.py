"""Build, save and open indexes of any kind."""

from __future__ import annotations

import json
import os
from pathlib import Path

from searchgym.errors import DataNotFoundError
from searchgym.registry import RETRIEVERS
from searchgym.retrievers.base import Retriever
from searchgym.retrievers.corpus import read_corpus

META_FILE = "searchgym.json"
"""Describes a saved index; its ``kind`` names, in `searchgym.registry.RETRIEVERS`, the class whose
``load(directory)`` opens it."""


def write_meta(directory: str | os.PathLike, meta: dict) -> None:
    """Describe a saved index (its ``kind`` first) in ``directory/searchgym.json``."""
    text = json.dumps(meta, indent=2, ensure_ascii=False) + "\n"
    (Path(directory) / META_FILE).write_text(text, encoding="utf-8")


def read_meta(directory: str | os.PathLike, kind: str | None = None, build_hint: str = "") -> dict:
    """The description of the index in ``directory``; with ``kind``, it must be of that kind.
    ``build_hint`` says how to build one when there is none."""
    path = Path(directory) / META_FILE
    if not path.is_file():
        what = f"{kind} index" if kind else "index"
        hint = build_hint or (
            f"searchgym index build --corpus CORPUS.jsonl --kind {kind or 'bm25'} --out {directory}"
        )
        raise DataNotFoundError(
            f"{directory} holds no searchgym {what} (no {META_FILE}); build one with {hint}"
        )
    meta = json.loads(path.read_text(encoding="utf-8"))
    if kind is not None and meta.get("kind") != kind:
        raise DataNotFoundError(f"{directory} holds a {meta.get('kind')!r} index, not {kind!r}")
    return meta


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
    """Build an index of ``kind`` from a JSONL corpus, save it to ``out`` and return it.
    ``options`` go to the backend's ``build``, or to its ``build_streaming`` where it has one
    (dense: ``encoder``, ``index``, ``batch_size``, ``shard_size``, ``keep_embeddings``)."""
    backend = RETRIEVERS.resolve(kind)  # an unknown kind suggests the closest
    if hasattr(backend, "build_streaming"):
        return backend.build_streaming(corpus, out, show_progress=show_progress, **options)
    built = backend.build(read_corpus(corpus), show_progress=show_progress, **options)
    built.save(out)
    return built
