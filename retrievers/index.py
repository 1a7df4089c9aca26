"""Build, save and open indexes of any kind."""

from __future__ import annotations

import importlib
import json
import os
from pathlib import Path

from searchgym.errors import ConfigError, DataNotFoundError
from searchgym.retrievers.base import Retriever
from searchgym.retrievers.corpus import read_corpus

# kind written in searchgym.json -> the class whose ``load(directory)`` opens it
KINDS = {
    "bm25": "searchgym.retrievers.bm25:BM25",
    "dense": "searchgym.retrievers.dense:Dense",
}


def load_index(directory: str | os.PathLike, **kwargs) -> Retriever:
    """The retriever saved in ``directory``, whatever its kind (``searchgym.json`` says)."""
    meta_path = Path(directory) / "searchgym.json"
    if not meta_path.is_file():
        raise DataNotFoundError(
            f"{directory} holds no searchgym index (no searchgym.json); build one with "
            "searchgym index build --corpus CORPUS.jsonl --kind bm25 --out DIR"
        )
    kind = json.loads(meta_path.read_text()).get("kind")
    if kind not in KINDS:
        raise DataNotFoundError(
            f"{directory} holds an index of unknown kind {kind!r}; known: {sorted(KINDS)}"
        )
    module, name = KINDS[kind].split(":")
    return getattr(importlib.import_module(module), name).load(directory, **kwargs)


def build_index(
    corpus: str | os.PathLike, kind: str, out: str | os.PathLike, *, show_progress: bool = False, **options
) -> Retriever:
    """Build an index of ``kind`` from a JSONL corpus, save it to ``out`` and return it.
    ``options`` go to the backend's ``build`` (for dense: ``encoder``, ``index``, ``batch_size``)."""
    if kind not in KINDS:
        raise ConfigError(f"unknown index kind {kind!r}; choose one of {sorted(KINDS)}")
    module, name = KINDS[kind].split(":")
    backend = getattr(importlib.import_module(module), name)
    built = backend.build(read_corpus(corpus), show_progress=show_progress, **options)
    built.save(out)
    return built
