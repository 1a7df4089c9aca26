"""A user's own questions, one JSON object a line (a questions JSONL)::

    {"question": "Who founded Treimyne Company?", "answers": ["Ada Voss", "A. Voss"]}
    {"id": "q2", "question": "...", "answers": ["..."], "evidence": ["doc-17"], "split": "train"}

``question`` and ``answers`` (a list of strings, or one string; FlashRAG's ``golden_answers`` is
read too) are required. ``id`` defaults to ``FILE_STEM/LINE``; ``evidence`` lists the gold
document ids in the order a solver needs them (default none), ``metadata`` is any JSON object,
and ``split`` puts the line in one split (a line without it is in every split). Any other field
is an error, so that a typo is not silently dropped.

`searchgym.tasks.load` reads a name ending in ``.jsonl`` as such a file, and so does every env's
``task_set`` option (``searchgym eval -E task_set=questions.jsonl``, a train config's
``env_kwargs``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from searchgym.errors import ConfigError, DataNotFoundError
from searchgym.tasks.task import Task, TaskSet

FIELDS = ("id", "question", "answers", "evidence", "metadata", "split")
_EXAMPLE = '{"question": "...", "answers": ["..."]}'


def is_questions_file(name: str | os.PathLike[str]) -> bool:
    """Whether a task set name is a questions JSONL (it ends in ``.jsonl``).

    >>> is_questions_file("my/questions.jsonl"), is_questions_file("fictional-2hop")
    (True, False)
    """
    return str(name).lower().endswith(".jsonl")


def load_questions(path: str | os.PathLike[str], split: str | None = None) -> TaskSet:
    """The tasks of the questions file ``path`` in ``split`` (every line when ``split`` is None).

    A missing file, a malformed line (named as ``FILE:LINE`` with the field at fault) or a split
    with no questions is a clear error.
    """
    path = Path(path)
    if not path.is_file():
        raise DataNotFoundError(
            f"questions file {path} does not exist (a task set ending in .jsonl is read as a file of "
            f"questions, one a line: {_EXAMPLE})"
        )
    tasks, splits, seen = [], set(), set()
    with path.open("rb") as lines:
        for lineno, raw in enumerate(lines, start=1):
            if not raw.strip():
                continue
            where = f"{path}:{lineno}"
            task, line_split = _parse_line(raw, where, default_id=f"{path.stem}/{lineno}")
            if task.id in seen:
                raise ConfigError(f"{where}: id {task.id!r} is used by an earlier line; ids must be unique")
            seen.add(task.id)
            splits.add(line_split)
            if split is None or line_split in (None, split):
                tasks.append(task)
    if not seen:
        raise ConfigError(f"{path} holds no questions; write one JSON object a line: {_EXAMPLE}")
    if not tasks:
        named = ", ".join(sorted(s for s in splits if s is not None))
        raise ConfigError(
            f'{path} has no questions in split {split!r}; its lines\' "split" fields name {named} '
            "(choose one of those, or leave a line's split out to put it in every split)"
        )
    named_splits = split is not None and splits != {None}
    return TaskSet(f"{path.name}/{split}" if named_splits else path.name, tasks)


def _parse_line(raw: bytes, where: str, default_id: str) -> tuple[Task, str | None]:
    """One line's task and its split; a `ConfigError` naming ``where`` and the field at fault."""
    try:
        row = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise ConfigError(f"{where}: not UTF-8 text ({e.reason} at byte {e.start})") from e
    except json.JSONDecodeError as e:
        raise ConfigError(
            f"{where}: not valid JSON ({e.msg} at column {e.colno}); expected {_EXAMPLE}"
        ) from e
    if not isinstance(row, Mapping):
        raise ConfigError(f"{where}: expected a JSON object such as {_EXAMPLE}, got {type(row).__name__}")
    row = dict(row)
    if "golden_answers" in row and "answers" not in row:  # FlashRAG's name for them
        row["answers"] = row.pop("golden_answers")
    unknown = sorted(set(row) - set(FIELDS))
    if unknown:
        raise ConfigError(
            f"{where}: unknown field(s) {unknown}; a line's fields are {', '.join(FIELDS)} "
            "(put anything else under metadata)"
        )
    for name in ("question", "answers"):
        if name not in row:
            raise ConfigError(
                f"{where}: no {name!r} field; every line needs question and answers: {_EXAMPLE}"
            )
    question = row["question"]
    if not isinstance(question, str) or not question.strip():
        raise ConfigError(f"{where}: 'question' must be a non-empty string, got {question!r}")
    answers = [row["answers"]] if isinstance(row["answers"], str) else row["answers"]
    if not _strings(answers) or not answers or not all(a.strip() for a in answers):
        raise ConfigError(
            f"{where}: 'answers' must be a non-empty list of non-empty strings, got {row['answers']!r}"
        )
    evidence = row.get("evidence", [])
    if not _strings(evidence):
        raise ConfigError(f"{where}: 'evidence' must be a list of document ids (strings), got {evidence!r}")
    metadata = row.get("metadata", {})
    if not isinstance(metadata, Mapping):
        raise ConfigError(f"{where}: 'metadata' must be a JSON object, got {metadata!r}")
    task_id, split = row.get("id", default_id), row.get("split")
    if isinstance(task_id, bool) or not isinstance(task_id, (str, int)) or not str(task_id).strip():
        raise ConfigError(f"{where}: 'id' must be a non-empty string or an integer, got {task_id!r}")
    if split is not None and (not isinstance(split, str) or not split.strip()):
        raise ConfigError(f"{where}: 'split' must be a non-empty string such as \"dev\", got {split!r}")
    task = Task(str(task_id), question, tuple(answers), tuple(evidence), dict(metadata))
    return task, split


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)
