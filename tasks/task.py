"""The unit of work an environment poses: a question, its gold answers and evidence."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Task:
    """One question with everything needed to score an answer to it.

    ``answers`` holds every accepted surface form (aliases included); ``evidence`` the ids of the
    corpus documents that support the answer, one per hop, in the order a solver needs them.
    ``metadata`` is free-form and JSON-serialisable (source dataset, hop count, reasoning chain).
    """

    id: str
    question: str
    answers: tuple[str, ...]
    evidence: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        if not self.question.strip():
            raise ValueError(f"task {self.id!r} has an empty question")
        if isinstance(self.answers, str):
            raise TypeError(
                f"task {self.id!r}: answers must be a tuple of strings, got the single string "
                f"{self.answers!r}; wrap it as ({self.answers!r},)"
            )
        object.__setattr__(self, "answers", tuple(self.answers))
        object.__setattr__(self, "evidence", tuple(self.evidence))

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "question": self.question,
            "answers": list(self.answers),
            "evidence": list(self.evidence),
            "metadata": self.metadata,
        }

    @classmethod
    def from_dict(cls, row: dict[str, Any]) -> Task:
        return cls(
            id=str(row["id"]),
            question=row["question"],
            answers=tuple(row["answers"]),
            evidence=tuple(row.get("evidence", ())),
            metadata=dict(row.get("metadata", {})),
        )


class TaskSet(Sequence[Task]):
    """An immutable, deterministic sequence of tasks with a name."""

    def __init__(self, name: str, tasks: Sequence[Task]) -> None:
        self.name = name
        self._tasks = tuple(tasks)
        if not self._tasks:
            raise ValueError(f"task set {name!r} is empty")

    def __len__(self) -> int:
        return len(self._tasks)

    def __getitem__(self, index):  # type: ignore[override]
        if isinstance(index, slice):
            return TaskSet(self.name, self._tasks[index])
        return self._tasks[index]

    def __iter__(self) -> Iterator[Task]:
        return iter(self._tasks)

    def __repr__(self) -> str:
        return f"TaskSet({self.name!r}, {len(self)} tasks)"
