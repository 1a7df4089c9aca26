"""Passage embeddings in shard files: written one shard at a time, resumable after a crash.

`embed_shards` encodes a `DocStore` into ``directory/shard-00000.npy``, ``shard-00001.npy``, …
of ``shard_size`` rows each. A shard file appears (atomically) only once it is complete, and
``manifest.json`` records what the shards are embeddings of (the corpus, the encoder, the shard
size), so running it again on the same directory encodes only the missing shards, and running it
with another corpus or encoder stops with an error instead of mixing embeddings. Memory is one
shard, never the whole corpus.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from searchgym.errors import ConfigError
from searchgym.retrievers.docstore import DocStore
from searchgym.retrievers.encoders import Encoder

MANIFEST = "manifest.json"
DTYPES = ("float32", "float16")


def shard_path(directory: Path, shard: int) -> Path:
    return directory / f"shard-{shard:05d}.npy"


def embed_shards(
    store: DocStore,
    encoder: Encoder,
    directory: str | os.PathLike,
    *,
    source: dict,
    shard_size: int = 100_000,
    batch_size: int = 64,
    dtype: str = "float32",
    show_progress: bool = False,
) -> int:
    """Encode every document of ``store`` (``title + "\\n" + text``, passage prefix) into shards
    under ``directory``, skipping shards already there. ``source`` identifies the corpus (saved in
    the manifest and compared on resume). Returns the number of shards encoded by this call."""
    if isinstance(shard_size, bool) or not isinstance(shard_size, int) or shard_size < 1:
        raise ConfigError(f"shard_size must be a positive integer, got {shard_size!r}")
    if dtype not in DTYPES:
        raise ConfigError(f"dtype must be one of {DTYPES}, got {dtype!r}")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    manifest = {
        "source": source,
        "n_docs": len(store),
        "encoder": encoder.spec(),
        "dim": encoder.dim,
        "shard_size": shard_size,
        "dtype": dtype,
    }
    _check_manifest(directory, manifest)
    n_shards = -(-len(store) // shard_size)
    todo = [s for s in range(n_shards) if not shard_path(directory, s).is_file()]
    done_docs = len(store) - sum(_shard_rows(len(store), shard_size, s) for s in todo)
    bar = tqdm(total=len(store), initial=done_docs, desc="embedding", unit=" docs", disable=not show_progress)
    with bar:
        for shard in todo:
            start = shard * shard_size
            docs = store[start : start + shard_size]
            vectors = encoder.encode_passages([f"{d.title}\n{d.text}" for d in docs], batch_size=batch_size)
            path = shard_path(directory, shard)
            tmp = path.with_name(f".{path.stem}.tmp.npy")
            np.save(tmp, vectors.astype(dtype, copy=False))
            os.replace(tmp, path)
            bar.update(len(docs))
    return len(todo)


def _shard_rows(n_docs: int, shard_size: int, shard: int) -> int:
    return min(shard_size, n_docs - shard * shard_size)


def _check_manifest(directory: Path, manifest: dict) -> None:
    path = directory / MANIFEST
    if path.is_file():
        saved = json.loads(path.read_text(encoding="utf-8"))
        differ = sorted(key for key in manifest if saved.get(key) != manifest[key])
        if differ:
            raise ConfigError(
                f"{directory} holds embeddings made with other settings ({', '.join(differ)} differ); "
                "pass another output directory, or delete it to start over"
            )
        return
    stray = sorted(directory.glob("shard-*.npy"))
    if stray:
        raise ConfigError(f"{directory} holds shard files but no {MANIFEST}; delete them to start over")
    path.write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def iter_shards(directory: str | os.PathLike) -> Iterator[np.ndarray]:
    """The shards under ``directory`` in order, as float32 arrays (one in memory at a time)."""
    directory = Path(directory)
    manifest = json.loads((directory / MANIFEST).read_text(encoding="utf-8"))
    n_shards = -(-manifest["n_docs"] // manifest["shard_size"])
    for shard in range(n_shards):
        path = shard_path(directory, shard)
        if not path.is_file():
            raise ConfigError(f"{path} is missing: run the embedding step again to finish it")
        yield np.load(path).astype(np.float32, copy=False)


def sample_rows(directory: str | os.PathLike, size: int, seed: int) -> np.ndarray:
    """``size`` rows drawn without replacement across all shards (fewer if there are fewer),
    in corpus order, as float32; reads one shard at a time."""
    directory = Path(directory)
    manifest = json.loads((directory / MANIFEST).read_text(encoding="utf-8"))
    n, shard_size = manifest["n_docs"], manifest["shard_size"]
    picked = np.sort(np.random.default_rng(seed).choice(n, size=min(n, size), replace=False))
    parts = []
    for shard in np.unique(picked // shard_size):
        rows = picked[picked // shard_size == shard] - shard * shard_size
        parts.append(np.load(shard_path(directory, int(shard)), mmap_mode="r")[rows].astype(np.float32))
    return np.concatenate(parts) if parts else np.empty((0, manifest["dim"]), dtype=np.float32)
