"""QA benchmark loaders, on small JSONL files written in each accepted shape."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from searchgym.errors import ConfigError, DataNotFoundError
from searchgym.tasks.datasets import (
    BENCHMARKS,
    benchmark_path,
    default_data_dir,
    load_benchmark,
    parse_row,
)
from searchgym.tasks.task import TaskSet


def write_split(data_dir: Path, name: str, split: str, rows: list[Any]) -> Path:
    """Write rows (dicts, or raw strings for malformed lines) where the loader looks."""
    path = data_dir / "qa" / name / f"{split}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [row if isinstance(row, str) else json.dumps(row) for row in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


FLASHRAG_ROWS = [
    {
        "id": "test_0",
        "question": "who wrote hamlet?",
        "golden_answers": ["Shakespeare", "William Shakespeare"],
        "metadata": {"difficulty": "easy"},
    },
    {"id": "test_1", "question": "capital of france?", "golden_answers": ["Paris"]},
    {"id": "test_2", "question": "largest planet?", "golden_answers": ["Jupiter"], "metadata": {}},
]


def test_benchmarks_list_the_flashrag_splits() -> None:
    assert list(BENCHMARKS) == [
        "nq",
        "triviaqa",
        "popqa",
        "hotpotqa",
        "2wikimultihopqa",
        "musique",
        "bamboogle",
    ]
    assert BENCHMARKS["nq"].splits == ("train", "dev", "test")
    assert BENCHMARKS["popqa"].splits == ("test",)
    assert BENCHMARKS["hotpotqa"].splits == ("train", "dev")
    assert BENCHMARKS["bamboogle"].splits == ("test",)
    assert [n for n, info in BENCHMARKS.items() if info.multi_hop] == [
        "hotpotqa",
        "2wikimultihopqa",
        "musique",
        "bamboogle",
    ]
    assert BENCHMARKS["musique"].display_name == "MuSiQue"
    assert BENCHMARKS["nq"].eval_split == "test"
    assert BENCHMARKS["2wikimultihopqa"].eval_split == "dev"


def test_default_data_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SEARCHGYM_DATA", str(tmp_path / "mine"))
    assert default_data_dir() == tmp_path / "mine"
    monkeypatch.delenv("SEARCHGYM_DATA")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_data_dir() == tmp_path / "xdg" / "searchgym" / "data"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_data_dir() == tmp_path / "home" / ".cache" / "searchgym" / "data"


def test_benchmark_path_layout(tmp_path: Path) -> None:
    assert benchmark_path("musique", "dev", tmp_path) == tmp_path / "qa" / "musique" / "dev.jsonl"


def test_load_flashrag_rows(tmp_path: Path) -> None:
    write_split(tmp_path, "nq", "test", FLASHRAG_ROWS)
    tasks = load_benchmark("nq", "test", data_dir=tmp_path)
    assert isinstance(tasks, TaskSet)
    assert tasks.name == "nq/test"
    assert [t.id for t in tasks] == ["nq/test/test_0", "nq/test/test_1", "nq/test/test_2"]
    first = tasks[0]
    assert first.question == "who wrote hamlet?"
    assert first.answers == ("Shakespeare", "William Shakespeare")
    assert first.evidence == ()
    assert first.metadata == {"difficulty": "easy", "source": "nq", "split": "test"}
    assert tasks[1].metadata == {"source": "nq", "split": "test"}


def test_load_respects_limit(tmp_path: Path) -> None:
    write_split(tmp_path, "nq", "test", [*FLASHRAG_ROWS, "{not json"])
    assert [t.id for t in load_benchmark("nq", data_dir=tmp_path, limit=2)] == [
        "nq/test/test_0",
        "nq/test/test_1",
    ]


@pytest.mark.parametrize("limit", [0, -1, 1.5, True])
def test_bad_limit(tmp_path: Path, limit: Any) -> None:
    with pytest.raises(ConfigError, match="limit must be a positive integer"):
        load_benchmark("nq", data_dir=tmp_path, limit=limit)


@pytest.mark.parametrize(
    ("row", "answers"),
    [
        ({"id": 7, "question": "q?", "answers": ["a", "b"]}, ("a", "b")),
        ({"id": 7, "question": "q?", "answer": "a"}, ("a",)),
        ({"id": 7, "question": "q?", "answer": ["a", 1984]}, ("a", "1984")),
        (
            {
                "id": 7,
                "question": "q?",
                "data_source": "nq",
                "ability": "fact-reasoning",
                "reward_model": {"style": "rule", "ground_truth": {"target": ["a", "b"]}},
            },
            ("a", "b"),
        ),
        ({"id": 7, "question": "q?", "reward_model": {"ground_truth": {"target": "a"}}}, ("a",)),
    ],
)
def test_accepted_answer_shapes(tmp_path: Path, row: dict[str, Any], answers: tuple) -> None:
    write_split(tmp_path, "triviaqa", "dev", [row])
    (task,) = load_benchmark("triviaqa", "dev", data_dir=tmp_path)
    assert task.id == "triviaqa/dev/7"
    assert task.answers == answers


def test_rows_without_id_use_their_index(tmp_path: Path) -> None:
    write_split(
        tmp_path, "popqa", "test", [{"question": "q1", "answer": "a"}, "", {"question": "q2", "answer": "b"}]
    )
    assert [t.id for t in load_benchmark("popqa", data_dir=tmp_path)] == [
        "popqa/test/0",
        "popqa/test/1",
    ]


def test_parse_row_gives_the_canonical_row() -> None:
    row = {
        "id": "x",
        "question": "q?",
        "reward_model": {"ground_truth": {"target": ["a"]}},
        "metadata": {"k": 1},
    }
    assert parse_row(row, 0) == {
        "id": "x",
        "question": "q?",
        "golden_answers": ["a"],
        "metadata": {"k": 1},
    }


@pytest.mark.parametrize(
    ("name", "metadata", "titles"),
    [
        (  # HotpotQA as FlashRAG stores it: columns of titles and sentence ids
            "hotpotqa",
            {
                "supporting_facts": {
                    "title": ["Arthur's Magazine", "First for Women", "Arthur's Magazine"],
                    "sent_id": [0, 0, 1],
                }
            },
            ["Arthur's Magazine", "First for Women"],
        ),
        (  # 2Wiki / original HotpotQA JSON: [title, sentence id] pairs
            "2wikimultihopqa",
            {"supporting_facts": [["Move (1970 film)", 0], ["Stuart Rosenberg", 1]]},
            ["Move (1970 film)", "Stuart Rosenberg"],
        ),
        (  # MuSiQue: paragraphs flagged is_supporting
            "musique",
            {
                "paragraphs": [
                    {"idx": 0, "title": "Green", "is_supporting": True},
                    {"idx": 1, "title": "Noise", "is_supporting": False},
                    {"idx": 2, "title": "Gold", "is_supporting": True},
                ]
            },
            ["Green", "Gold"],
        ),
    ],
)
def test_multi_hop_evidence_titles(
    tmp_path: Path, name: str, metadata: dict[str, Any], titles: list[str]
) -> None:
    write_split(
        tmp_path, name, "dev", [{"id": "d0", "question": "q?", "golden_answers": ["a"], "metadata": metadata}]
    )
    (task,) = load_benchmark(name, "dev", data_dir=tmp_path)
    assert task.metadata["evidence_titles"] == titles
    assert task.metadata["source"] == name and task.metadata["split"] == "dev"


def test_no_evidence_titles_without_supporting_facts(tmp_path: Path) -> None:
    write_split(tmp_path, "bamboogle", "test", [{"id": 1, "question": "q?", "answer": "a"}])
    write_split(
        tmp_path,
        "nq",
        "test",
        [{"id": 1, "question": "q?", "answer": "a", "metadata": {"supporting_facts": [["T", 0]]}}],
    )
    assert "evidence_titles" not in load_benchmark("bamboogle", data_dir=tmp_path)[0].metadata
    assert "evidence_titles" not in load_benchmark("nq", data_dir=tmp_path)[0].metadata


def test_searchgym_data_is_the_default_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SEARCHGYM_DATA", str(tmp_path))
    write_split(tmp_path, "nq", "test", FLASHRAG_ROWS)
    assert len(load_benchmark("nq")) == 3


@pytest.mark.parametrize(
    ("name", "match"),
    [
        ("hotpot", r"unknown benchmark 'hotpot'; did you mean 'hotpotqa'\?"),
        ("NQ", r"did you mean 'nq'\?"),
        ("squad", r"unknown benchmark 'squad'; known benchmarks: nq, triviaqa, popqa, hotpotqa"),
    ],
)
def test_unknown_benchmark(tmp_path: Path, name: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        load_benchmark(name, data_dir=tmp_path)


def test_unknown_split(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"'hotpotqa' has no split 'test'.*train, dev"):
        load_benchmark("hotpotqa", "test", data_dir=tmp_path)


def test_missing_file_names_the_fetch_command(tmp_path: Path) -> None:
    command = f"python data_scripts/fetch_qa.py --dataset musique --split dev --out {tmp_path}"
    with pytest.raises(DataNotFoundError, match=re.escape(command)) as info:
        load_benchmark("musique", "dev", data_dir=tmp_path)
    assert isinstance(info.value, FileNotFoundError)


@pytest.mark.parametrize(
    ("bad_line", "match"),
    [
        ("{not json", "malformed row: Expecting property name"),
        ("[1, 2]", "expected a JSON object, got list"),
        ('{"id": "b", "question": "  ", "answer": "a"}', "missing or empty 'question'"),
        ('{"id": "b", "question": "q?"}', "no gold answers; expected one of 'golden_answers'"),
        ('{"id": "b", "question": "q?", "golden_answers": []}', "'golden_answers' is an empty"),
        ('{"id": "b", "question": "q?", "answer": {"x": 1}}', "'answer' must be a string or"),
        ('{"id": "b", "question": "q?", "answer": [null]}', "non-string answer None"),
        ('{"id": "b", "question": "q?", "answer": "a", "metadata": [1]}', "'metadata' must be"),
        ('{"id": "test_0", "question": "q?", "answer": "a"}', "duplicate id 'test_0'"),
    ],
)
def test_malformed_line_names_file_and_line(tmp_path: Path, bad_line: str, match: str) -> None:
    path = write_split(tmp_path, "nq", "dev", [FLASHRAG_ROWS[0], "", bad_line, FLASHRAG_ROWS[1]])
    with pytest.raises(ConfigError, match=rf"{re.escape(str(path))}, line 3: .*{match}"):
        load_benchmark("nq", "dev", data_dir=tmp_path)


def test_empty_file(tmp_path: Path) -> None:
    write_split(tmp_path, "nq", "dev", [""])
    with pytest.raises(ConfigError, match="holds no rows"):
        load_benchmark("nq", "dev", data_dir=tmp_path)
