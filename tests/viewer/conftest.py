from pathlib import Path

import pytest
from viewer_runs import write_injection_run, write_sweep, write_train_run

from searchgym.cli import main


@pytest.fixture(scope="session")
def eval_dir(tmp_path_factory) -> Path:
    """A real eval directory, made by `searchgym eval` (oracle and heuristic, 6 tasks)."""
    out = tmp_path_factory.mktemp("runs") / "eval-bm25"
    assert main(["eval", "--agent", "oracle,heuristic", "--n", "6", "--out", str(out), "--no-progress"]) == 0
    return out


@pytest.fixture(scope="session")
def train_dir(tmp_path_factory) -> Path:
    return write_train_run(tmp_path_factory.mktemp("runs") / "grpo-run")


@pytest.fixture(scope="session")
def sweep_dir(tmp_path_factory, eval_dir) -> Path:
    return write_sweep(tmp_path_factory.mktemp("runs") / "sweep", eval_dir)


@pytest.fixture(scope="session")
def injection_dir(tmp_path_factory) -> Path:
    return write_injection_run(tmp_path_factory.mktemp("runs") / "evil")
