"""Tasks: questions with gold answers and evidence, task sets, loaders and answer metrics."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from searchgym.errors import ConfigError
from searchgym.registry import TASK_SETS
from searchgym.tasks.datasets import load_benchmark
from searchgym.tasks.metrics import (
    AnswerScores,
    cover_em,
    exact_match,
    f1,
    normalize_answer,
    score_answer,
)
from searchgym.tasks.questions import is_questions_file, load_questions
from searchgym.tasks.task import Task, TaskSet
from searchgym.tasks.world import load_world


def load(name: str | os.PathLike[str], split: str = "dev", **kwargs: Any) -> TaskSet:
    """Load the task set registered as ``name`` (`searchgym.registry.TASK_SETS`), or named as
    ``"module:attr"``, or the questions file ``name`` when it ends in ``.jsonl``
    (`searchgym.tasks.questions`: one ``{"question", "answers", ...}`` a line, a line's ``split``
    field choosing its split); an unknown name suggests the closest (``searchgym list task-sets``
    lists them).

    ``fictional`` is the generated world (all hop counts) and ``fictional-Khop`` its K-hop
    questions (keyword arguments ``seed``, ``n_passages``); ``miniwiki`` the questions over real
    Wikipedia lead paragraphs, ``fanoutqa`` FanOutQA's questions over those paragraphs, and the
    benchmark names (``nq``, ``hotpotqa``, … see `searchgym.tasks.datasets.BENCHMARKS`) read
    local files (keyword argument ``data_dir``). `searchgym.register_task_set` adds a task set.

    >>> load("fictional-2hop", n_passages=300)[0].metadata["hops"]
    2
    """
    if is_questions_file(name):
        if kwargs:
            raise ConfigError(f"a questions file takes no options, got {sorted(kwargs)} for {str(name)!r}")
        return load_questions(name, split)
    if os.path.isfile(name):
        raise ConfigError(f"{str(name)!r} is a file, not a task set name: name a file of questions *.jsonl")
    return TASK_SETS.make(str(name), split=split, **kwargs)


def load_fictional(
    split: str = "dev", *, hops: int | Sequence[int] | None = None, seed: int = 0, n_passages: int = 2000
) -> TaskSet:
    """The ``split`` questions of the generated world ``(seed, n_passages)``, of every hop count
    or those in ``hops`` (the ``fictional`` and ``fictional-Khop`` task sets)."""
    return load_world(seed=seed, n_passages=n_passages).tasks(split, hops=hops)


__all__ = [
    "AnswerScores",
    "Task",
    "TaskSet",
    "cover_em",
    "exact_match",
    "f1",
    "load",
    "load_benchmark",
    "load_fictional",
    "load_questions",
    "normalize_answer",
    "score_answer",
]
