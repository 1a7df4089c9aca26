"""Tasks: questions with gold answers and evidence, task sets, loaders and answer metrics."""

from __future__ import annotations

import re
from typing import Any

from searchgym.errors import ConfigError
from searchgym.tasks.datasets import BENCHMARKS, load_benchmark
from searchgym.tasks.metrics import (
    AnswerScores,
    cover_em,
    exact_match,
    f1,
    normalize_answer,
    score_answer,
)
from searchgym.tasks.task import Task, TaskSet

_FICTIONAL = re.compile(r"fictional(?:-(\d)hop)?")


def load(name: str, split: str = "dev", **kwargs: Any) -> TaskSet:
    """Load a task set by name.

    ``fictional`` is the generated world (all hop counts) and ``fictional-Khop`` its K-hop
    questions (keyword arguments ``seed``, ``n_passages``); ``miniwiki`` the questions over real
    Wikipedia lead paragraphs and the benchmark names (``nq``, ``hotpotqa``, … see
    ``BENCHMARKS``) read local files (keyword argument ``data_dir``).
    """
    m = _FICTIONAL.fullmatch(name)
    if m:
        from searchgym.tasks.world import load_world

        hops = int(m.group(1)) if m.group(1) else None
        return load_world(**kwargs).tasks(split, hops=hops)
    if name == "miniwiki":
        from searchgym.tasks.miniwiki import load_miniwiki

        return load_miniwiki(split, **kwargs)
    if name in BENCHMARKS:
        return load_benchmark(name, split, **kwargs)
    raise ConfigError(
        f"unknown task set {name!r}; use 'fictional', 'fictional-Khop' (K = 1..4), 'miniwiki' or one of "
        f"{', '.join(BENCHMARKS)}"
    )


__all__ = [
    "AnswerScores",
    "Task",
    "TaskSet",
    "cover_em",
    "exact_match",
    "f1",
    "load",
    "load_benchmark",
    "normalize_answer",
    "score_answer",
]
