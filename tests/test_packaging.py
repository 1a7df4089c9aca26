"""The top-level folders install as sub-packages of `searchgym`, and only there."""

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run_python(code: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True)


@pytest.mark.parametrize("name", ["agents", "envs", "retrievers", "tasks"])
def test_generic_names_are_not_importable(name, tmp_path):
    result = run_python(f"import {name}; print({name}.__file__)", cwd=tmp_path)
    if result.returncode == 0:  # another distribution owns the name (openai-agents installs agents)
        assert Path(result.stdout.strip()).resolve().parent != ROOT / name, result.stdout
    else:
        assert "ModuleNotFoundError" in result.stderr
    result = run_python(f"import searchgym.{name}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr


@pytest.mark.slow
def test_wheel_holds_only_the_searchgym_package(tmp_path):
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("searchgym-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert tops == {"searchgym", next(t for t in tops if t.endswith(".dist-info"))}
    # every module of the source folders, so that a new subpackage missing from pyproject.toml's
    # package list fails here (agents/gateway once did: programs could not run from a wheel)
    sources = {
        f"searchgym/{path.relative_to(ROOT / folder).as_posix()}"
        if folder == "searchgym"
        else f"searchgym/{folder}/{path.relative_to(ROOT / folder).as_posix()}"
        for folder in ("searchgym", "envs", "agents", "retrievers", "tasks")
        for path in (ROOT / folder).rglob("*.py")
    }
    assert sorted(sources - set(names)) == []
    entry_points = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("entry_points.txt")))
    assert b"searchgym = searchgym.cli:main" in entry_points
