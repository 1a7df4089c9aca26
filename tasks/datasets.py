"""Loaders for the QA benchmarks Search-R1 evaluates on, in the FlashRAG JSONL shape.

Files live at ``{data_dir}/qa/{name}/{split}.jsonl``; ``data_scripts/fetch_qa.py`` writes them.
One row per line: ``{"id", "question", "golden_answers": [...], "metadata": {...}}``. Readers also
accept ``answers`` or ``answer`` (a string or a list) instead of ``golden_answers``, and the
Search-R1 form ``reward_model.ground_truth.target``.
"""

from __future__ import annotations

import difflib
import json
import os
import shlex
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from searchgym.errors import ConfigError, DataNotFoundError
from searchgym.tasks.task import Task, TaskSet

HUB_REPO_ID = "RUC-NLPIR/FlashRAG_datasets"
_ANSWER_KEYS = ("golden_answers", "answers", "answer")


@dataclass(frozen=True)
class BenchmarkInfo:
    """What we know of one benchmark: its display name, the splits FlashRAG publishes for it on
    the Hugging Face Hub (``RUC-NLPIR/FlashRAG_datasets``), and whether its questions need
    several hops."""

    display_name: str
    splits: tuple[str, ...]
    multi_hop: bool

    @property
    def eval_split(self) -> str:
        """The split Search-R1 evaluates on: ``test`` where published, else ``dev``."""
        return "test" if "test" in self.splits else "dev"


BENCHMARKS: Mapping[str, BenchmarkInfo] = MappingProxyType(
    {
        "nq": BenchmarkInfo("Natural Questions", ("train", "dev", "test"), multi_hop=False),
        "triviaqa": BenchmarkInfo("TriviaQA", ("train", "dev", "test"), multi_hop=False),
        "popqa": BenchmarkInfo("PopQA", ("test",), multi_hop=False),
        "hotpotqa": BenchmarkInfo("HotpotQA", ("train", "dev"), multi_hop=True),
        "2wikimultihopqa": BenchmarkInfo("2WikiMultihopQA", ("train", "dev"), multi_hop=True),
        "musique": BenchmarkInfo("MuSiQue", ("train", "dev"), multi_hop=True),
        "bamboogle": BenchmarkInfo("Bamboogle", ("test",), multi_hop=True),
    }
)


def benchmark_info(name: str) -> BenchmarkInfo:
    """The `BenchmarkInfo` for ``name``; an unknown name is a `ConfigError` suggesting the
    closest known one."""
    if name in BENCHMARKS:
        return BENCHMARKS[name]
    known = ", ".join(BENCHMARKS)
    close = difflib.get_close_matches(name.lower(), list(BENCHMARKS), n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise ConfigError(f"unknown benchmark {name!r}; {hint}known benchmarks: {known}")


def check_split(name: str, split: str) -> None:
    """Raise `ConfigError` unless FlashRAG publishes ``split`` for benchmark ``name``."""
    info = benchmark_info(name)
    if split not in info.splits:
        raise ConfigError(
            f"benchmark {name!r} has no split {split!r}; FlashRAG publishes "
            f"{', '.join(info.splits)} for it (its evaluation split is {info.eval_split!r})"
        )


def default_data_dir() -> Path:
    """``$SEARCHGYM_DATA`` if set, else ``$XDG_CACHE_HOME/searchgym/data`` (``~/.cache`` when
    ``XDG_CACHE_HOME`` is unset)."""
    if os.environ.get("SEARCHGYM_DATA"):
        return Path(os.environ["SEARCHGYM_DATA"]).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache).expanduser() / "searchgym" / "data"


def benchmark_path(name: str, split: str, data_dir: str | os.PathLike[str] | None = None) -> Path:
    """The canonical file of one benchmark split: ``{data_dir}/qa/{name}/{split}.jsonl``."""
    check_split(name, split)
    root = Path(data_dir) if data_dir is not None else default_data_dir()
    return root / "qa" / name / f"{split}.jsonl"


def _as_answer_list(value: Any, key: str) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)):
        raise ValueError(f"{key!r} must be a string or a list of strings, got {value!r}")
    answers = []
    for item in value:
        if isinstance(item, bool) or not isinstance(item, (str, int, float)):
            raise ValueError(f"{key!r} holds a non-string answer {item!r}")
        answers.append(str(item))
    if not answers:
        raise ValueError(f"{key!r} is an empty list")
    return answers


def _gold_answers(row: Mapping[str, Any]) -> list[str]:
    for key in _ANSWER_KEYS:
        if row.get(key) is not None:
            return _as_answer_list(row[key], key)
    ground_truth = row.get("reward_model")
    for key in ("ground_truth", "target"):
        ground_truth = ground_truth.get(key) if isinstance(ground_truth, Mapping) else None
    if ground_truth is not None:
        return _as_answer_list(ground_truth, "reward_model.ground_truth.target")
    expected = ", ".join(repr(k) for k in (*_ANSWER_KEYS, "reward_model.ground_truth.target"))
    raise ValueError(f"no gold answers; expected one of {expected}")


def parse_row(row: Any, index: int) -> dict[str, Any]:
    """Turn one accepted row into our canonical row ``{"id", "question", "golden_answers",
    "metadata"}``; ``index`` (0-based) is the id when the row has none.

    Raises `ValueError` saying what is wrong with the row.

    >>> parse_row({"question": "Who?", "answer": "Ada"}, 7)
    {'id': '7', 'question': 'Who?', 'golden_answers': ['Ada'], 'metadata': {}}
    """
    if not isinstance(row, Mapping):
        raise ValueError(f"expected a JSON object, got {type(row).__name__}")
    question = row.get("question")
    if not isinstance(question, str) or not question.strip():
        raise ValueError("missing or empty 'question'")
    metadata = row.get("metadata") or {}
    if not isinstance(metadata, Mapping):
        raise ValueError(f"'metadata' must be an object, got {type(metadata).__name__}")
    row_id = row.get("id")
    return {
        "id": str(index if row_id is None else row_id),
        "question": question,
        "golden_answers": _gold_answers(row),
        "metadata": dict(metadata),
    }


def read_rows(path: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    """Stream the canonical rows of a JSONL file, skipping blank lines.

    A malformed line or a repeated id raises `ConfigError` naming the file and line number.
    """
    path = Path(path)
    seen: set[str] = set()
    with path.open(encoding="utf-8") as lines:
        for lineno, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                row = parse_row(json.loads(line), index=len(seen))
            except ValueError as e:  # json.JSONDecodeError is a ValueError
                raise ConfigError(f"{path}, line {lineno}: malformed row: {e}") from e
            if row["id"] in seen:
                raise ConfigError(f"{path}, line {lineno}: duplicate id {row['id']!r}")
            seen.add(row["id"])
            yield row


def _supporting_titles(metadata: Mapping[str, Any]) -> list[str]:
    """Titles of the supporting paragraphs, in order, without repeats.

    Understands HotpotQA/2Wiki ``supporting_facts`` (``{"title": [...]}`` or ``[[title, sent],
    ...]``) and MuSiQue ``paragraphs`` (``[{"title", "is_supporting"}, ...]``).
    """
    facts = metadata.get("supporting_facts")
    titles: list[Any] = []
    if isinstance(facts, Mapping):
        titles = list(facts.get("title") or [])
    elif isinstance(facts, list):
        for fact in facts:
            if isinstance(fact, (list, tuple)) and fact:
                titles.append(fact[0])
            elif isinstance(fact, Mapping):
                titles.append(fact.get("title"))
    paragraphs = metadata.get("paragraphs")
    if isinstance(paragraphs, list):
        supporting = [p for p in paragraphs if isinstance(p, Mapping) and p.get("is_supporting")]
        titles += [p.get("title") for p in supporting]
    return list(dict.fromkeys(t for t in titles if isinstance(t, str) and t))


def _to_task(row: Mapping[str, Any], name: str, split: str) -> Task:
    metadata = {**row["metadata"], "source": name, "split": split}
    if BENCHMARKS[name].multi_hop:
        titles = _supporting_titles(row["metadata"])
        if titles:
            metadata["evidence_titles"] = titles
    return Task(
        id=f"{name}/{split}/{row['id']}",
        question=row["question"],
        answers=tuple(row["golden_answers"]),
        metadata=metadata,
    )


def load_benchmark(
    name: str,
    split: str = "test",
    data_dir: str | os.PathLike[str] | None = None,
    limit: int | None = None,
) -> TaskSet:
    """Load one benchmark split (the first ``limit`` rows if given) as a `TaskSet` named
    ``{name}/{split}``.

    A missing file is a `DataNotFoundError` whose message gives the command that fetches it.
    """
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ConfigError(f"limit must be a positive integer or None, got {limit!r}")
    path = benchmark_path(name, split, data_dir)
    if not path.is_file():
        out = path.parent.parent.parent
        raise DataNotFoundError(
            f"{path} does not exist; create it with: python data_scripts/fetch_qa.py "
            f"--dataset {name} --split {split} --out {shlex.quote(str(out))}"
        )
    tasks: list[Task] = []
    for row in read_rows(path):
        tasks.append(_to_task(row, name, split))
        if limit is not None and len(tasks) >= limit:
            break
    if not tasks:
        raise ConfigError(f"{path} holds no rows; fetch it again with data_scripts/fetch_qa.py")
    return TaskSet(f"{name}/{split}", tasks)
