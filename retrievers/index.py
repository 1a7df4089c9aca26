"""Open a saved index of any kind from its directory."""

from __future__ import annotations

import importlib
import json
import os
from pathlib import Path

from searchgym.errors import DataNotFoundError
from searchgym.retrievers.base import Retriever

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
            "python data_scripts/build_bm25_index.py --corpus CORPUS.jsonl --out DIR"
        )
    kind = json.loads(meta_path.read_text()).get("kind")
    if kind not in KINDS:
        raise DataNotFoundError(
            f"{directory} holds an index of unknown kind {kind!r}; known: {sorted(KINDS)}"
        )
    module, name = KINDS[kind].split(":")
    return getattr(importlib.import_module(module), name).load(directory, **kwargs)
