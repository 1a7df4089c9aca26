"""Dense retrieval: an `Encoder` and a FAISS inner-product index (Flat, HNSW or IVF-PQ).

Documents are encoded as ``title + "\\n" + text``, like `BM25`. Vectors are unit length, so inner
product is cosine similarity and a document's score is that similarity (approximate for IVF-PQ).
Unlike BM25, every non-empty query has neighbours, even one made of unknown words; an empty or
blank query returns ``[]``.

Batched encoding is not bitwise batch-invariant: ``batch_search(qs)`` equals
``[search(q) for q in qs]`` up to float rounding of the scores (about 1e-7).
"""

from __future__ import annotations

import logging
import math
import os
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Literal

import numpy as np
from tqdm.auto import tqdm

from searchgym.errors import ConfigError, DataNotFoundError, import_optional
from searchgym.retrievers.base import Doc, check_batch
from searchgym.retrievers.corpus import read_corpus
from searchgym.retrievers.docstore import DOCS_FILE, DocStore, write_docstore
from searchgym.retrievers.embeddings import MANIFEST, embed_shards, iter_shards, sample_rows
from searchgym.retrievers.encoders import DEFAULT_ENCODER, Encoder
from searchgym.retrievers.index import META_FILE, check_out_dir, read_meta, replace_dir, staged, write_meta

logger = logging.getLogger(__name__)

_INDEX = "index.faiss"
_EMBEDDINGS = "embeddings"

# Index types and their parameters, with defaults; None means "chosen from the corpus size".
INDEX_PARAMS: dict[str, dict] = {
    "flat": {},
    "hnsw": {"M": 32, "ef_construction": 200, "ef_search": 128},
    "ivfpq": {"nlist": None, "m": None, "nbits": 8, "nprobe": 16, "train_size": 100_000, "seed": 0},
}
_SEARCH_PARAMS = {"hnsw": ("ef_search",), "ivfpq": ("nprobe",)}
_GPU_INDEXES = ("flat", "ivfpq")  # faiss has no GPU HNSW
IndexKind = Literal["flat", "hnsw", "ivfpq"]


def _faiss():
    return import_optional("faiss", "cpu")


def _index_params(index: str, given: dict) -> dict:
    if index not in INDEX_PARAMS:
        raise ConfigError(f"index must be one of {sorted(INDEX_PARAMS)}, got {index!r}")
    unknown = sorted(set(given) - set(INDEX_PARAMS[index]))
    if unknown:
        allowed = ", ".join(INDEX_PARAMS[index]) or "none"
        raise ConfigError(f"unknown parameters {unknown} for a {index!r} index; it takes: {allowed}")
    for key, value in given.items():
        lowest = 0 if key == "seed" else 1
        if value is None and INDEX_PARAMS[index][key] is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < lowest:
            raise ConfigError(f"{key} must be an integer >= {lowest}, got {value!r}")
    return {**INDEX_PARAMS[index], **given}


def _new_index(dim: int, n: int, index: str, params: dict):
    """An empty FAISS inner-product index for ``n`` vectors of ``dim``; fills in ``params``
    chosen from the data. IVF-PQ must still be trained (`_train`)."""
    faiss = _faiss()
    if index == "flat":
        return faiss.IndexFlatIP(dim)
    if index == "hnsw":
        built = faiss.IndexHNSWFlat(dim, params["M"], faiss.METRIC_INNER_PRODUCT)
        built.hnsw.efConstruction = params["ef_construction"]
        built.hnsw.efSearch = params["ef_search"]
        return built
    if params["nlist"] is None:
        params["nlist"] = max(1, min(int(4 * math.sqrt(n)), n // 39))
    if params["m"] is None:
        params["m"] = next(c for c in (dim // 8, dim // 4, dim // 2, dim) if c and dim % c == 0)
    nlist, m, nbits = params["nlist"], params["m"], params["nbits"]
    if dim % m:
        raise ConfigError(f"m={m} must divide the vector dimension {dim}; pick a divisor of {dim}")
    needed = _training_size(params)
    if n < needed:
        raise ConfigError(
            f"an IVF-PQ index with nlist={nlist}, nbits={nbits} needs at least {needed} documents "
            f"to train, the corpus has {n}; lower nlist or nbits, or use index='flat'"
        )
    built = faiss.IndexIVFPQ(faiss.IndexFlatIP(dim), dim, nlist, m, nbits, faiss.METRIC_INNER_PRODUCT)
    built.nprobe = params["nprobe"]
    return built


def _training_size(params: dict) -> int:
    """The fewest vectors an IVF-PQ index can train on: one per list and per PQ code."""
    return max(params["nlist"], 2 ** params["nbits"])


def _training_sample(params: dict) -> int:
    """How many vectors IVF-PQ trains on (fewer if the corpus is smaller): ``train_size``, raised
    to the 39 per list that FAISS's k-means asks for."""
    return max(params["train_size"], 39 * params["nlist"], _training_size(params))


def _build_index(vectors: np.ndarray, index: str, params: dict):
    """A FAISS inner-product index holding ``vectors`` (all in memory)."""
    n, dim = vectors.shape
    built = _new_index(dim, n, index, params)
    if index == "ivfpq":
        rng = np.random.default_rng(params["seed"])
        sample = rng.choice(n, size=min(n, _training_sample(params)), replace=False)
        built.train(vectors[np.sort(sample)])
    built.add(vectors)
    return built


def _corpus_source(corpus: str | os.PathLike) -> dict:
    """What identifies a corpus file for resuming: its path, size and modification time."""
    path = Path(corpus).resolve()
    if not path.is_file():
        raise DataNotFoundError(f"corpus file {corpus} does not exist")
    stat = path.stat()
    return {"path": str(path), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


def _to_gpu(index, kind: str, use_gpu: bool | None):
    """Move ``index`` to GPU 0 when asked (True) or when possible (None); else return it as is."""
    if use_gpu is False:
        return index
    faiss = _faiss()
    import torch

    gpu_faiss = hasattr(faiss, "StandardGpuResources") and faiss.get_num_gpus() > 0
    possible = gpu_faiss and torch.cuda.is_available() and kind in _GPU_INDEXES
    if not possible:
        if use_gpu:
            raise ConfigError(
                f'use_gpu=True needs a CUDA GPU, a GPU build of faiss (pip install "searchgym[gpu]") '
                f"and an index of type {' or '.join(_GPU_INDEXES)}; this is a {kind!r} index and "
                f"faiss {'sees a GPU' if gpu_faiss else 'has no GPU support or sees no GPU'}"
            )
        return index
    try:
        return faiss.index_cpu_to_gpu(faiss.StandardGpuResources(), 0, index)
    except RuntimeError:
        if use_gpu:
            raise
        logger.warning("could not move the %s index to GPU; searching on CPU", kind, exc_info=True)
        return index


class Dense:
    """Dense retrieval with an `Encoder` and a FAISS index.

    Build with `Dense.build` (or `Dense.from_corpus`), save to a directory, `Dense.load` it back.
    ``index`` is ``"flat"`` (exact), ``"hnsw"`` (``M``, ``ef_construction``, ``ef_search``) or
    ``"ivfpq"`` (``nlist``, ``m``, ``nbits``, ``nprobe``, ``train_size``, ``seed``); see
    `INDEX_PARAMS` for the defaults.
    """

    def __init__(self, index, docs: Sequence[Doc], encoder: Encoder, params: dict) -> None:
        self._index = index
        self._docs = docs if isinstance(docs, DocStore) else list(docs)
        if isinstance(self._docs, DocStore):
            self._find = self._docs.index_of
        else:
            self._find = {d.id: i for i, d in enumerate(self._docs)}.get
        self.encoder = encoder
        self.params = params
        self.batch_size = 64

    @classmethod
    def build(
        cls,
        docs: Iterable[Doc],
        encoder: Encoder | str = DEFAULT_ENCODER,
        *,
        index: IndexKind = "flat",
        batch_size: int = 64,
        show_progress: bool = False,
        use_gpu: bool | None = None,
        **index_params,
    ) -> Dense:
        params = {"index": index, **_index_params(index, index_params)}
        docs = list(docs)
        if not docs:
            raise ValueError("cannot build a dense index from an empty corpus")
        encoder = Encoder(encoder) if isinstance(encoder, str) else encoder
        vectors = encoder.encode_passages(
            [f"{d.title}\n{d.text}" for d in docs], batch_size=batch_size, show_progress=show_progress
        )
        built = _build_index(vectors, index, params)
        dense = cls(_to_gpu(built, index, use_gpu), docs, encoder, params)
        dense.batch_size = batch_size
        return dense

    @classmethod
    def from_corpus(
        cls, path: str | os.PathLike, encoder: Encoder | str = DEFAULT_ENCODER, **kwargs
    ) -> Dense:
        """Build from a JSONL corpus file (either row shape, see `retrievers.corpus`)."""
        return cls.build(read_corpus(path), encoder, **kwargs)

    @classmethod
    def build_streaming(
        cls,
        corpus: str | os.PathLike,
        out: str | os.PathLike,
        encoder: Encoder | str = DEFAULT_ENCODER,
        *,
        index: IndexKind = "flat",
        shard_size: int = 100_000,
        batch_size: int = 64,
        dtype: str = "float32",
        keep_embeddings: bool = False,
        show_progress: bool = False,
        **index_params,
    ) -> Dense:
        """Index a corpus file of any size into ``out`` and open it, holding one shard of
        embeddings in memory at a time (plus the FAISS index itself).

        Documents are streamed into a `DocStore`, encoded into shard files under
        ``out/embeddings`` (see `embed_shards`), and added to the index shard by shard (IVF-PQ
        trains first on ``train_size`` vectors sampled across shards). Interrupted, the same call
        resumes: finished shards are not encoded again. ``keep_embeddings`` keeps the shards after
        the index is written, e.g. to build another index type from them. ``dtype="float16"``
        halves their size on disk.
        """
        params = {"index": index, **_index_params(index, index_params)}
        out = check_out_dir(out)
        # a build works in ``out`` until it writes the manifest; over a complete index it works
        # in a sibling that replaces ``out`` at the end, so the old index serves until then
        work = out.with_name(f".{out.name}.rebuild") if (out / META_FILE).is_file() else out
        shards = work / _EMBEDDINGS
        encoder = Encoder(encoder) if isinstance(encoder, str) else encoder
        source = _corpus_source(corpus)
        resuming = (shards / MANIFEST).is_file() and (work / DOCS_FILE).is_file()
        if not resuming and not write_docstore(
            read_corpus(corpus, unique_ids=False), work, show_progress=show_progress
        ):
            raise ValueError(f"cannot build a dense index from an empty corpus ({corpus})")
        store = DocStore(work)
        embed_shards(
            store,
            encoder,
            shards,
            source=source,
            shard_size=shard_size,
            batch_size=batch_size,
            dtype=dtype,
            show_progress=show_progress,
        )
        built = _new_index(encoder.dim, len(store), index, params)
        if index == "ivfpq":
            built.train(sample_rows(shards, _training_sample(params), params["seed"]))
        for vectors in tqdm(iter_shards(shards), desc="indexing", unit=" shards", disable=not show_progress):
            built.add(vectors)
        if not keep_embeddings:
            shutil.rmtree(shards)
        cls(built, store, encoder, params).save(work)  # the manifest last: now the index is complete
        store.close()
        if work != out:
            replace_dir(work, out)
        dense = cls(built, DocStore(out), encoder, params)
        dense.batch_size = batch_size
        return dense

    def save(self, directory: str | os.PathLike) -> None:
        """Save to ``directory``, replacing an index there whole or not at all (`staged`); an index
        whose documents are already in ``directory`` (a streaming build) gets its FAISS index and
        manifest written beside them."""
        directory = Path(directory)
        if isinstance(self._docs, DocStore) and self._docs.path == directory / DOCS_FILE:
            self._write_index(directory)
            return
        with staged(directory) as tmp:
            write_docstore(self._docs, tmp)
            self._write_index(tmp)

    def _write_index(self, directory: Path) -> None:
        """The FAISS index and, last, the manifest, beside the documents in ``directory``."""
        faiss = _faiss()
        index = self._index
        if hasattr(faiss, "index_gpu_to_cpu") and "Gpu" in type(index).__name__:
            index = faiss.index_gpu_to_cpu(index)
        faiss.write_index(index, str(directory / _INDEX))
        meta = {
            "kind": "dense",
            "backend": "faiss",
            "encoder": self.encoder.spec(),
            "dim": self.encoder.dim,
            "n_docs": len(self._docs),
            **self.params,
        }
        write_meta(directory, meta)

    @classmethod
    def load(
        cls,
        directory: str | os.PathLike,
        *,
        encoder: Encoder | None = None,
        device: str | None = None,
        use_gpu: bool | None = None,
    ) -> Dense:
        """Load a saved index. The encoder is rebuilt from the saved metadata (on ``device``)
        unless ``encoder`` is given; it must produce vectors of the index's dimension."""
        directory = Path(directory)
        meta = read_meta(directory, "dense", "Dense.from_corpus(CORPUS, ENCODER).save(DIR)")
        encoder = encoder or Encoder(**meta["encoder"], device=device)
        differ = [
            key
            for key in ("pooling", "query_prefix", "passage_prefix")
            if encoder.spec()[key] != meta["encoder"][key]
        ]
        if differ:
            logger.warning("the encoder's %s differ from those %s was built with", differ, directory)
        if encoder.dim != meta["dim"]:
            raise ConfigError(
                f"the encoder gives {encoder.dim}-d vectors but {directory} holds {meta['dim']}-d ones; "
                f"load it with the encoder it was built with ({meta['encoder']['name']!r})"
            )
        index = _faiss().read_index(str(directory / _INDEX))
        params = {"index": meta["index"], **{key: meta[key] for key in INDEX_PARAMS[meta["index"]]}}
        dense = cls(_to_gpu(index, meta["index"], use_gpu), DocStore(directory), encoder, params)
        dense.set_search_params(**{key: params[key] for key in _SEARCH_PARAMS.get(params["index"], ())})
        return dense

    def set_search_params(self, *, ef_search: int | None = None, nprobe: int | None = None) -> None:
        """Trade speed for recall: ``ef_search`` of an HNSW index, ``nprobe`` of an IVF-PQ one."""
        kind = self.params["index"]
        for name, value in (("ef_search", ef_search), ("nprobe", nprobe)):
            if value is None:
                continue
            if name not in _SEARCH_PARAMS.get(kind, ()):
                raise ConfigError(f"{name} does not apply to a {kind!r} index")
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
            if name == "ef_search":
                self._index.hnsw.efSearch = value
            else:
                self._index.nprobe = value
            self.params[name] = value

    def __len__(self) -> int:
        return len(self._docs)

    def search(self, query: str, k: int = 3) -> list[Doc]:
        return self.batch_search([query], k)[0]

    def batch_search(self, queries: Sequence[str], k: int = 3) -> list[list[Doc]]:
        check_batch(queries, k)
        results: list[list[Doc]] = [[] for _ in queries]
        live = [i for i, q in enumerate(queries) if q.strip()]
        if not live:
            return results
        vectors = self.encoder.encode_queries([queries[i] for i in live], batch_size=self.batch_size)
        scores, ids = self._index.search(vectors, min(k, len(self._docs)))
        for row, i in enumerate(live):
            results[i] = [
                replace(self._docs[j], score=s)
                for j, s in zip(ids[row].tolist(), scores[row].tolist())
                if j >= 0
            ]
        return results

    def doc(self, doc_id: str) -> Doc | None:
        i = self._find(doc_id)
        return None if i is None else self._docs[i]

    def close(self) -> None:
        """Release the memory map of the documents of a loaded index."""
        if isinstance(self._docs, DocStore):
            self._docs.close()
