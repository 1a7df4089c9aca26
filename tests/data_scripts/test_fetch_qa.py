"""data_scripts/fetch_qa.py, run as users run it: a subprocess reading a local --source dir."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from searchgym.errors import ConfigError
from searchgym.tasks.datasets import load_benchmark

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "data_scripts" / "fetch_qa.py"

NQ_ROWS = [
    {
        "id": "test_0",
        "question": "who wrote hamlet?",
        "golden_answers": ["Shakespeare"],
        "metadata": {"k": 1},
    },
    {"id": "test_1", "question": "capital of france?", "golden_answers": ["Paris"]},
]
HOTPOT_ROWS = [  # Search-R1 / other shapes, converted to canonical rows on the way
    {
        "id": "h0",
        "question": "which magazine came first?",
        "answer": "Arthur's Magazine",
        "metadata": {"supporting_facts": {"title": ["Arthur's Magazine", "First for Women"]}},
    },
    {"id": "h1", "question": "q?", "reward_model": {"ground_truth": {"target": ["yes"]}}},
    {"id": "h2", "question": "é?", "answers": ["Ünïcödé"]},
]


def write_source(root: Path, name: str, split: str, rows: list[Any]) -> Path:
    path = root / name / f"{split}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [row if isinstance(row, str) else json.dumps(row) for row in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def run_script(*args: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *map(str, args)],
        cwd=REPO,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def fetch_qa() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fetch_qa", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_fetch_from_local_source(tmp_path: Path) -> None:
    source, out = tmp_path / "flashrag", tmp_path / "out"
    write_source(source, "nq", "test", NQ_ROWS)
    write_source(source, "hotpotqa", "dev", HOTPOT_ROWS)

    result = run_script(
        "--dataset", "nq", "--dataset", "hotpotqa", "--source", source, "--out", out, "--no-progress"
    )

    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert result.stdout.splitlines() == [
        f"wrote 2 rows to {out / 'qa' / 'nq' / 'test.jsonl'}",
        f"wrote 3 rows to {out / 'qa' / 'hotpotqa' / 'dev.jsonl'}",
    ]
    nq = load_benchmark("nq", "test", data_dir=out)
    assert [(t.id, t.answers) for t in nq] == [
        ("nq/test/test_0", ("Shakespeare",)),
        ("nq/test/test_1", ("Paris",)),
    ]
    hotpot = load_benchmark("hotpotqa", "dev", data_dir=out)
    assert [t.answers for t in hotpot] == [("Arthur's Magazine",), ("yes",), ("Ünïcödé",)]
    assert hotpot[0].metadata["evidence_titles"] == ["Arthur's Magazine", "First for Women"]
    first = json.loads((out / "qa" / "hotpotqa" / "dev.jsonl").read_text("utf-8").splitlines()[0])
    assert list(first) == ["id", "question", "golden_answers", "metadata"]


def test_comma_list_and_explicit_split(tmp_path: Path) -> None:
    source, out = tmp_path / "flashrag", tmp_path / "out"
    write_source(source, "nq", "dev", NQ_ROWS)
    write_source(source, "triviaqa", "dev", NQ_ROWS[:1])
    result = run_script(
        "--dataset", "nq,triviaqa", "--split", "dev", "--source", source, "--out", out, "--no-progress"
    )
    assert result.returncode == 0, result.stderr
    assert len(load_benchmark("triviaqa", "dev", data_dir=out)) == 1


def test_progress_bar_goes_to_stderr(tmp_path: Path) -> None:
    write_source(tmp_path / "src", "bamboogle", "test", NQ_ROWS)
    result = run_script("--dataset", "bamboogle", "--source", tmp_path / "src", "--out", tmp_path)
    assert result.returncode == 0, result.stderr
    assert "bamboogle/test" in result.stderr


def test_out_defaults_to_searchgym_data(tmp_path: Path) -> None:
    write_source(tmp_path / "src", "popqa", "test", NQ_ROWS)
    result = run_script(
        "--dataset",
        "popqa",
        "--source",
        tmp_path / "src",
        "--no-progress",
        env={"SEARCHGYM_DATA": str(tmp_path / "data")},
    )
    assert result.returncode == 0, result.stderr
    assert len(load_benchmark("popqa", data_dir=tmp_path / "data")) == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--dataset", "hotpot"], "unknown benchmark 'hotpot'; did you mean 'hotpotqa'?"),
        (
            ["--dataset", "all", "--split", "test"],
            "benchmark 'hotpotqa' has no split 'test'; FlashRAG publishes train, dev for it",
        ),
        (["--dataset", "musique"], "musique/dev.jsonl does not exist; --source DIR must hold"),
    ],
)
def test_errors_are_reported_before_anything_is_written(
    tmp_path: Path, args: list[str], message: str
) -> None:
    (tmp_path / "src").mkdir()
    result = run_script(*args, "--source", tmp_path / "src", "--out", tmp_path / "out")
    assert result.returncode == 1
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()


def test_source_that_is_no_directory_is_not_sent_to_the_hub(tmp_path: Path) -> None:
    result = run_script("--dataset", "nq", "--source", tmp_path / "typo", "--out", tmp_path)
    assert result.returncode == 1
    assert f"--source '{tmp_path / 'typo'}' is neither a directory nor a Hub dataset id" in (result.stderr)


def test_hub_offline_fails_fast_with_advice(tmp_path: Path) -> None:
    env = {"HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}  # an empty cache
    result = run_script("--dataset", "bamboogle", "--out", tmp_path / "out", env=env)
    assert result.returncode == 1
    if importlib.util.find_spec("huggingface_hub") is None:
        assert 'pip install "searchgym[data]"' in result.stderr
    else:
        assert "could not download bamboogle/test.jsonl" in result.stderr
        assert "HF_HUB_OFFLINE" in result.stderr
    assert "--source DIR" in result.stderr
    assert "Traceback" not in result.stderr


def test_missing_huggingface_hub_names_the_extra(tmp_path: Path) -> None:
    fake = tmp_path / "fake" / "huggingface_hub"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('simulated: not installed')\n")
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(fake.parent), os.environ.get("PYTHONPATH")]))}
    result = run_script("--dataset", "nq", "--out", tmp_path / "out", env=env)
    assert result.returncode == 1
    assert 'pip install "searchgym[data]"' in result.stderr
    assert "or pass --source DIR holding DIR/nq/test.jsonl" in result.stderr


def test_convert_returns_the_row_count(fetch_qa: ModuleType, tmp_path: Path) -> None:
    src = write_source(tmp_path, "nq", "test", NQ_ROWS)
    dst = tmp_path / "out" / "nq.jsonl"
    assert fetch_qa.convert(src, dst, "nq", "test", progress=False) == 2
    assert [json.loads(line)["golden_answers"] for line in dst.read_text().splitlines()] == [
        ["Shakespeare"],
        ["Paris"],
    ]


def test_convert_is_atomic(fetch_qa: ModuleType, tmp_path: Path) -> None:
    src = write_source(tmp_path, "nq", "test", [NQ_ROWS[0], "{broken"])
    dst = tmp_path / "out" / "test.jsonl"
    dst.parent.mkdir()
    dst.write_text("previous contents\n")
    with pytest.raises(ConfigError, match=r"test\.jsonl, line 2: malformed row"):
        fetch_qa.convert(src, dst, "nq", "test", progress=False)
    assert dst.read_text() == "previous contents\n"
    assert [p.name for p in dst.parent.iterdir()] == ["test.jsonl"]  # no temp file left


def test_convert_refuses_an_empty_source(fetch_qa: ModuleType, tmp_path: Path) -> None:
    src = write_source(tmp_path, "nq", "test", [""])
    with pytest.raises(ConfigError, match="holds no rows"):
        fetch_qa.convert(src, tmp_path / "out.jsonl", "nq", "test", progress=False)
    assert not (tmp_path / "out.jsonl").exists()


def test_an_unreachable_hub_fails_within_seconds_saying_so(tmp_path: Path) -> None:
    """Offline, the hub client retries for about 25 s; the script reads only the cache and fails at once."""
    env = {"HF_ENDPOINT": "http://127.0.0.1:9", "HF_HOME": str(tmp_path / "hf")}  # nothing listens on port 9
    start = time.monotonic()
    result = run_script("--dataset", "nq", "--out", tmp_path / "out", env=env)
    assert result.returncode == 1 and time.monotonic() - start < 20
    assert "the hub cannot be reached and it is not in the local cache" in result.stderr
    assert "pass --source DIR holding DIR/nq/test.jsonl" in result.stderr
