"""The side venvs of `.ci/side-venvs`, for adapters whose packages cannot share the main venv.

A test runs a script with a side venv's python (`run_in`) and reads the JSON it prints; where the
venv is missing the test skips and names the command that creates it.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]


def side_python(name: str) -> Path:
    """The python of side venv ``name`` (``.venv-NAME`` at the repository's root, or under
    ``$SEARCHGYM_SIDE_VENVS``); skips the test where it is missing."""
    base = Path(os.environ.get("SEARCHGYM_SIDE_VENVS", ROOT))
    python = base / f".venv-{name}" / "bin" / "python"
    if not python.is_file():
        pytest.skip(f"side venv .venv-{name} is missing: create it with `bash .ci/side-venvs` (CI does)")
    return python


def run_in(name: str, script: Path, *args: str, timeout: float = 600) -> Any:
    """Run ``script`` with side venv ``name``'s python; the JSON object its last stdout line holds.
    A failing script fails the test with its stderr."""
    done = subprocess.run(
        [str(side_python(name)), str(script), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT / "tests")},
    )
    if done.returncode != 0:
        pytest.fail(f"{script.name} failed in .venv-{name} (exit {done.returncode}):\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


__all__ = ["run_in", "side_python"]
