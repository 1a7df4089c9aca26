"""Entry points of the registered environments (imported lazily by the registry)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

from searchgym.envs.rewards import RewardWeights
from searchgym.envs.search_env import SearchEnv
from searchgym.envs.wrappers import TurnLimit
from searchgym.errors import ConfigError
from searchgym.retrievers import BM25, Doc, Retriever
from searchgym.retrievers.index import read_meta
from searchgym.tasks.datasets import benchmark_info, default_data_dir, load_benchmark
from searchgym.tasks.task import Task
from searchgym.tasks.world import load_world


def reward_weights(rewards: RewardWeights | dict[str, Any] | None) -> RewardWeights:
    """Accept weights as the dataclass or as a plain mapping (from YAML or the CLI)."""
    if rewards is None or isinstance(rewards, RewardWeights):
        return rewards or RewardWeights()
    known = {f.name for f in fields(RewardWeights)}
    unknown = sorted(set(rewards) - known)
    if unknown:
        raise ConfigError(f"unknown reward weight(s) {unknown}; known: {sorted(known)}")
    return RewardWeights(**rewards)


@functools.lru_cache(maxsize=4)
def world_bm25(seed: int, n_passages: int) -> BM25:
    """The BM25 index of a generated world, built once per process and shared by its envs."""
    world = load_world(seed=seed, n_passages=n_passages)
    return BM25.build(Doc(p["id"], p["title"], p["text"]) for p in world.passages)


def search_env(
    tasks: Sequence[Task],
    retriever: Retriever,
    *,
    max_turns: int = 8,
    rewards: RewardWeights | dict[str, Any] | None = None,
    **options: Any,
) -> TurnLimit:
    """A `SearchEnv` under a `TurnLimit`. ``options`` are SearchEnv's: ``protocol`` ("tags" or
    "tool_calls"), ``top_k`` (3) and ``max_obs_tokens`` (512)."""
    known = set(inspect.signature(SearchEnv).parameters) - {"tasks", "retriever", "rewards"}
    unknown = sorted(set(options) - known)
    if unknown:
        choices = sorted(known | {"max_turns", "rewards"})
        raise ConfigError(f"unknown env option(s) {unknown}; the options are {choices}")
    return TurnLimit(SearchEnv(tasks, retriever, rewards=reward_weights(rewards), **options), max_turns)


def fictional_qa(
    *,
    seed: int = 0,
    n_passages: int = 2000,
    split: str = "dev",
    hops: int | list[int] | None = None,
    **options: Any,
) -> TurnLimit:
    """Questions about the generated world, searched with BM25 over its corpus; ``options`` go
    to `search_env`."""
    tasks = load_world(seed=seed, n_passages=n_passages).tasks(split, hops=hops)
    return search_env(tasks, world_bm25(seed, n_passages), **options)


@functools.lru_cache(maxsize=2)
def _load_bm25(index_dir: str) -> BM25:
    return BM25.load(index_dir, mmap=True)


def benchmark_qa(
    *,
    dataset: str,
    split: str | None = None,
    data_dir: str | Path | None = None,
    index_dir: str | Path | None = None,
    **options: Any,
) -> TurnLimit:
    """A real QA benchmark (Search-R1/FlashRAG files) searched with BM25 over a local index;
    ``options`` go to `search_env`.

    Files are looked up under ``data_dir`` (default ``$SEARCHGYM_DATA`` or
    ``~/.cache/searchgym/data``): ``qa/{dataset}/{split}.jsonl`` and, unless ``index_dir`` is
    given, the index ``indexes/wiki18-bm25``. ``split`` defaults to the one Search-R1 evaluates on.
    """
    data_dir = Path(data_dir) if data_dir else default_data_dir()
    tasks = load_benchmark(dataset, split or benchmark_info(dataset).eval_split, data_dir=data_dir)
    index_dir = Path(index_dir) if index_dir else data_dir / "indexes" / "wiki18-bm25"
    read_meta(index_dir, "bm25")  # a missing index names the command that builds it
    return search_env(tasks, _load_bm25(str(index_dir)), **options)
