"""`Rerank`: a cross-encoder re-scores the top candidates of another retriever.

A cross-encoder reads the query and one passage together and returns a relevance score: slower
than a first-stage retriever, usually more accurate. Models that work, each a transformers
sequence-classification model:

- ``cross-encoder/ms-marco-MiniLM-L-6-v2``: English MiniLM (22M parameters) trained on MS MARCO;
  one logit per pair.
- ``BAAI/bge-reranker-base``: XLM-RoBERTa base (278M parameters), English and Chinese; one logit
  per pair.

A hub id downloads on first use, which needs access to https://huggingface.co; later runs find
the model in the local hub cache, also with ``HF_HUB_OFFLINE=1`` set (which stops any network
access). Without hub access, copy the model on a machine that has it
(``hf download cross-encoder/ms-marco-MiniLM-L-6-v2 --local-dir DIR``) and pass ``DIR``.
torch and transformers are imported when a reranker is made, not with this module.

Batched scoring is not bitwise batch-invariant: ``batch_search(qs)`` equals
``[search(q) for q in qs]`` up to float rounding of the scores (about 1e-6).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from searchgym.errors import ConfigError, DataNotFoundError
from searchgym.hub import load_locally
from searchgym.retrievers.base import Doc, Retriever, check_batch
from searchgym.retrievers.index import Parts, build_retriever

DEFAULT_RERANKER = "cross-encoder/ms-marco-MiniLM-L-6-v2"


def _positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{name} must be a positive integer, got {value!r}")
    return value


def _looks_like_path(name: str) -> bool:
    """True for a filesystem path; hub ids are ``name`` or ``namespace/name``."""
    return name.startswith((".", "/", "~")) or "\\" in name or name.count("/") > 1


class Rerank:
    """Re-score the top ``depth`` documents of ``retriever`` with a cross-encoder and return the
    best ``k`` by that score (ties keep the first-stage order); ``Doc.score`` is the cross-encoder
    score.

    ``model`` is a hub id or a local directory of a transformers sequence-classification model
    (see the module docstring). A document is read as ``title + "\\n" + text``; pairs longer than
    ``max_length`` tokens lose the end of the document, and a query is cut to half of
    ``max_length`` so every document keeps room. The score is the model's logit, or for a
    two-label model the log-odds of the second label (taken as "relevant"): ``logit_1 - logit_0``.
    Pairs are scored in mini-batches of ``batch_size``. ``device`` None picks ``"cuda"`` when
    available, else ``"cpu"``. An empty or blank query returns ``[]``.
    """

    def __init__(
        self,
        retriever: Retriever,
        model: str,
        *,
        depth: int = 50,
        batch_size: int = 32,
        max_length: int = 512,
        device: str | None = None,
        show_progress: bool = False,
    ) -> None:
        self.depth = _positive_int("depth", depth)
        self.batch_size = _positive_int("batch_size", batch_size)
        _positive_int("max_length", max_length)
        import torch

        self.retriever = retriever
        self.name = str(model)
        self.show_progress = show_progress
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        self.tokenizer, self.model = self._load(self.name)
        num_labels = self.model.config.num_labels
        if num_labels not in (1, 2):
            raise ConfigError(
                f"{self.name!r} has {num_labels} output labels; a cross-encoder for reranking has 1 "
                "(a relevance logit) or 2 (not relevant, relevant)"
            )
        self.model.to(self.device).eval()
        limits = [max_length, getattr(self.model.config, "max_position_embeddings", None) or max_length]
        limits.append(getattr(self.tokenizer, "model_max_length", None) or max_length)
        self.max_length = int(min(limits))

    @classmethod
    def build(
        cls,
        docs: Iterable[Doc],
        *,
        reranker: str = DEFAULT_RERANKER,
        parts: Parts | None = None,
        **options: Any,
    ) -> Rerank:
        """The ``rerank`` retriever kind: BM25 over ``docs`` re-scored by the cross-encoder
        ``reranker``; ``options`` are `Rerank`'s (``depth``, ``batch_size``, …). ``parts`` gives the
        BM25 retriever (see `RetrieverKind`; default: built here)."""
        if parts is None:
            parts = functools.partial(build_retriever, docs=list(docs))
        return cls(parts("bm25"), reranker, **options)

    @staticmethod
    def _load(name: str):
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        how = (
            "give a local directory written by save_pretrained (on a machine with hub access: "
            f"hf download {name} --local-dir DIR), or a hub id where https://huggingface.co is "
            "reachable; with HF_HUB_OFFLINE=1 only models already in the local hub cache load"
        )
        path = Path(name).expanduser()
        if path.is_dir() and not (path / "config.json").is_file():
            raise DataNotFoundError(f"cannot load cross-encoder {name!r}: {path} holds no config.json; {how}")
        if not path.is_dir() and _looks_like_path(name):
            raise DataNotFoundError(
                f"cannot load cross-encoder {name!r}: there is no directory {path}; {how}"
            )
        source = str(path) if path.is_dir() else name
        local = load_locally(path)
        try:
            tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=local)
            model = AutoModelForSequenceClassification.from_pretrained(source, local_files_only=local)
        except OSError as e:
            reason = " ".join(str(e).split())  # transformers' message spans lines
            raise DataNotFoundError(f"cannot load cross-encoder {name!r} ({reason}); {how}") from e
        return tokenizer, model

    def search(self, query: str, k: int = 3) -> list[Doc]:
        return self.batch_search([query], k)[0]

    def batch_search(self, queries: Sequence[str], k: int = 3) -> list[list[Doc]]:
        check_batch(queries, k)
        results: list[list[Doc]] = [[] for _ in queries]
        live = [i for i, q in enumerate(queries) if q.strip()]
        if not live:
            return results
        candidates = self.retriever.batch_search([queries[i] for i in live], max(k, self.depth))
        pairs = [(i, doc) for i, docs in zip(live, candidates) for doc in docs]
        scores = self.score([queries[i] for i, _ in pairs], [f"{d.title}\n{d.text}" for _, d in pairs])
        start = 0
        for i, docs in zip(live, candidates):
            own = scores[start : start + len(docs)]
            start += len(docs)
            order = sorted(range(len(docs)), key=lambda j: -own[j])  # stable: ties keep first-stage order
            results[i] = [replace(docs[j], score=own[j]) for j in order[:k]]
        return results

    def score(self, queries: Sequence[str], passages: Sequence[str]) -> list[float]:
        """The cross-encoder score of each (query, passage) pair, in input order. Pairs are
        batched longest first, to pad little."""
        if isinstance(queries, str) or isinstance(passages, str) or len(queries) != len(passages):
            raise TypeError("score takes two sequences of texts of the same length")
        import torch

        clipped = self._clip_queries(queries)
        out = [0.0] * len(queries)
        order = sorted(range(len(queries)), key=lambda i: -len(clipped[i]) - len(passages[i]))
        bar = tqdm(total=len(order), desc="reranking", disable=not self.show_progress)
        with torch.inference_mode(), bar:
            for start in range(0, len(order), self.batch_size):
                rows = order[start : start + self.batch_size]
                for i, s in zip(
                    rows, self._score_batch([clipped[i] for i in rows], [passages[i] for i in rows])
                ):
                    out[i] = s
                bar.update(len(rows))
        return out

    def _clip_queries(self, queries: Sequence[str]) -> list[str]:
        """Cut queries to half of ``max_length`` tokens (the tokenizer cannot truncate only the
        passage when the query alone fills the budget); each distinct query is tokenised once."""
        limit = max(1, self.max_length // 2)
        clipped: dict[str, str] = {}
        for q in dict.fromkeys(queries):
            if not self.tokenizer.is_fast:
                clipped[q] = q
                continue
            enc = self.tokenizer(q, add_special_tokens=False, return_offsets_mapping=True)
            offsets = enc["offset_mapping"]
            clipped[q] = q[: offsets[limit - 1][1]] if len(offsets) > limit else q
        return [clipped[q] for q in queries]

    def _score_batch(self, queries: list[str], passages: list[str]) -> list[float]:
        batch = self.tokenizer(
            queries,
            passages,
            padding=True,
            truncation="only_second",
            max_length=self.max_length,
            return_tensors="pt",
        ).to(self.device)
        logits = self.model(**batch).logits.float()
        scores = logits[:, 0] if logits.shape[-1] == 1 else logits[:, 1] - logits[:, 0]
        return scores.cpu().tolist()

    def doc(self, doc_id: str) -> Doc | None:
        return self.retriever.doc(doc_id)

    def close(self) -> None:
        """Close the first-stage retriever; the model needs no closing."""
        self.retriever.close()

    def __repr__(self) -> str:
        return f"Rerank({self.retriever!r}, {self.name!r}, depth={self.depth}, device={str(self.device)!r})"
