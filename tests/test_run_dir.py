"""`searchgym.run_dir`: one run per directory, and no run overwritten or resumed by accident."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from searchgym.errors import ConfigError
from searchgym.run_dir import checkpoint_steps, claim_run_dir


def checkpoint(run_dir, step: int) -> None:
    path = run_dir / "checkpoints" / f"step-{step:06d}"
    path.mkdir(parents=True)
    (path / "state.json").write_text("{}")


def test_a_second_run_fails_at_once_naming_the_holders_pid(tmp_path):
    code = (
        "import sys, time; from searchgym.run_dir import claim_run_dir\n"
        f"lock = claim_run_dir({str(tmp_path)!r}); print('locked', flush=True); time.sleep(60)"
    )
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        start = time.perf_counter()
        with pytest.raises(ConfigError, match=rf"in use by another run \(PID {holder.pid}\); wait for it"):
            claim_run_dir(tmp_path)
        assert time.perf_counter() - start < 1
    finally:
        holder.kill()
        holder.wait()
    claim_run_dir(tmp_path).release()  # the kernel dropped the dead holder's lock


def test_a_later_run_of_the_same_process_takes_over_its_lock(tmp_path):
    first = claim_run_dir(tmp_path)  # a run that raised, its lock still referenced by the traceback
    second = claim_run_dir(tmp_path)
    assert (tmp_path / ".lock").read_text().strip() == str(os.getpid())
    second.release()
    first.release()


def test_a_fresh_start_over_checkpoints_is_refused_unless_overwrite(tmp_path):
    checkpoint(tmp_path, 0)
    checkpoint(tmp_path, 20)
    (tmp_path / "checkpoints" / "step-000030").mkdir()  # incomplete: no state.json
    assert checkpoint_steps(tmp_path) == [0, 20]
    with pytest.raises(
        ConfigError, match=r"checkpoints up to step 20\): add --resume to continue it, --overwrite"
    ):
        claim_run_dir(tmp_path)
    claim_run_dir(tmp_path, overwrite=True).release()
    claim_run_dir(tmp_path, resume=True).release()


def test_resume_without_a_checkpoint_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="holds no checkpoint to resume from; drop --resume"):
        claim_run_dir(tmp_path / "new", resume=True)
    with pytest.raises(ConfigError, match="give one of them"):
        claim_run_dir(tmp_path, resume=True, overwrite=True)


def test_unusable_directories_are_refused_before_any_work(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match=r"--run-dir .*file is a file, not a directory"):
        claim_run_dir(tmp_path / "file" / "run")
    with pytest.raises(ConfigError, match=r"--run-dir /proc/searchgym-run: cannot write in /proc"):
        claim_run_dir("/proc/searchgym-run")


def test_other_processes_of_a_data_parallel_run_only_check(tmp_path, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    assert claim_run_dir(tmp_path / "run") is None and not (tmp_path / "run").exists()
