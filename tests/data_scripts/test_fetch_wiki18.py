"""data_scripts/fetch_wiki18.py on small local files the test writes.

The Hub download itself is not tested: nothing downloads from the Hub here. What is tested of it
is that an unreachable Hub ends in advice, not a traceback.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from searchgym.errors import ConfigError
from searchgym.retrievers import Doc, read_corpus

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "data_scripts" / "fetch_wiki18.py"

ROWS = [  # Search-R1's shape: the quoted title on the first line of "contents"
    {"id": "0", "contents": '"Aaron"\nAaron is a prophet, high priest, and the brother of Moses.'},
    {"id": "1", "contents": '"Ünïcödé title"\nFirst line.\nSecond line.'},
    {"id": "2", "title": "Ours", "text": "Rows already in our shape pass through."},
    {"id": "3", "contents": '"Last"\nThe fourth passage.'},
]
EXPECTED = [
    Doc("0", "Aaron", "Aaron is a prophet, high priest, and the brother of Moses."),
    Doc("1", "Ünïcödé title", "First line.\nSecond line."),
    Doc("2", "Ours", "Rows already in our shape pass through."),
    Doc("3", "Last", "The fourth passage."),
]


def write_jsonl(path: Path, rows: list, *, gz: bool) -> Path:
    text = "".join((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n" for r in rows)
    if gz:
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.write(text)
    else:
        path.write_text(text, encoding="utf-8")
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
def fetch_wiki18() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fetch_wiki18", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("gz", [True, False])
def test_local_source_is_normalised_in_order(tmp_path: Path, gz: bool) -> None:
    # the name says nothing: gzip is recognised by its content
    source = write_jsonl(tmp_path / "wiki.jsonl", ROWS, gz=gz)
    result = run_script("--source", source, "--no-progress", env={"SEARCHGYM_DATA": str(tmp_path / "data")})
    assert result.returncode == 0, result.stderr
    out = tmp_path / "data" / "corpora" / "wiki18.jsonl"
    assert list(read_corpus(out)) == EXPECTED
    assert json.loads(out.read_text("utf-8").splitlines()[0]) == {
        "id": "0",
        "title": "Aaron",
        "text": EXPECTED[0].text,
    }
    index = tmp_path / "data" / "indexes" / "wiki18-bm25"
    assert result.stdout.splitlines() == [
        f"wrote 4 passages to {out}",
        "build the BM25 index the benchmark envs search with:",
        f"  searchgym index build --corpus {out} --kind bm25 --out {index}",
    ]


def test_limit_keeps_the_first_passages(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "wiki-18.jsonl.gz", [*ROWS, "{broken"], gz=True)
    out = tmp_path / "out" / "wiki18.jsonl"
    result = run_script("--source", source, "--out", out, "--limit", "2")
    assert result.returncode == 0, result.stderr
    assert list(read_corpus(out)) == EXPECTED[:2]  # the broken row after the limit is never read
    assert "wiki-18" in result.stderr  # the progress bar


def test_streams_one_row_at_a_time(fetch_wiki18: ModuleType, tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "wiki.jsonl.gz", ROWS, gz=True)
    passages = fetch_wiki18.read_passages(source)
    assert next(passages) == EXPECTED[0]  # a generator: nothing past the first row is parsed yet
    assert list(passages) == EXPECTED[1:]


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([ROWS[0], "{broken"], r"line 2: Expecting property name"),
        ([ROWS[0], '["a list"]'], r"line 2: expected a JSON object, got list"),
        ([{"id": "9", "title": "no text"}], r"line 1: corpus row '9' has neither 'text' nor 'contents'"),
        ([""], "holds no passages"),
    ],
)
def test_bad_sources_leave_the_output_untouched(
    fetch_wiki18: ModuleType, tmp_path: Path, rows: list, message: str
) -> None:
    source = write_jsonl(tmp_path / "src.jsonl.gz", rows, gz=True)
    out = tmp_path / "out" / "wiki18.jsonl"
    out.parent.mkdir()
    out.write_text("previous contents\n")
    with pytest.raises(ConfigError, match=message):
        fetch_wiki18.convert(source, out, progress=False)
    assert out.read_text() == "previous contents\n"
    assert [p.name for p in out.parent.iterdir()] == ["wiki18.jsonl"]  # no temp file left


def test_truncated_gzip_is_a_clear_error(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "src.jsonl.gz", ROWS * 50, gz=True)
    source.write_bytes(source.read_bytes()[:-20])
    result = run_script("--source", source, "--out", tmp_path / "out.jsonl", "--no-progress")
    assert result.returncode == 1
    assert f"error: {source}, line" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "out.jsonl").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--source", "missing.jsonl.gz"], "missing.jsonl.gz does not exist; --source must be a .jsonl"),
        (["--source", "x.jsonl", "--limit", "0"], "--limit must be a positive number of passages, got 0"),
    ],
)
def test_argument_errors(tmp_path: Path, args: list[str], message: str) -> None:
    result = run_script(*args, "--out", tmp_path / "out.jsonl")
    assert result.returncode == 1
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_unreachable_hub_ends_in_advice(tmp_path: Path) -> None:
    env = {"HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}  # an empty cache
    result = run_script("--out", tmp_path / "out.jsonl", env=env)
    assert result.returncode == 1
    if importlib.util.find_spec("huggingface_hub") is None:
        assert 'pip install "searchgym[data]"' in result.stderr
    else:
        assert "could not download wiki-18.jsonl.gz from the Hugging Face Hub dataset" in result.stderr
        assert "'PeterJinGo/wiki-18-corpus'" in result.stderr
    assert "--source FILE" in result.stderr
    assert "Traceback" not in result.stderr
