"""A training run's directory, claimed before any work: one run at a time, and a finished or
interrupted run is never overwritten by accident. A leaf module: it imports nothing from
agents or envs, and knows of checkpoints only their folder names (``checkpoints/step-N`` with a
``state.json`` written last, as `searchgym.agents.train.checkpoint` writes them).

>>> import tempfile
>>> lock = claim_run_dir(tempfile.mkdtemp())
>>> lock.release()
"""

from __future__ import annotations

import fcntl
import os
import re
from pathlib import Path

from searchgym.errors import ConfigError
from searchgym.files import check_writable_dir

LOCK_FILE = ".lock"
_STEP_DIR = re.compile(r"step-(\d{6,})")
_MARKER = "state.json"
_HELD: dict[Path, RunDirLock] = {}  # this process's locks: a new run here takes over its own


class RunDirLock:
    """An exclusive `flock` on ``RUN_DIR/.lock``, which holds the owner's PID. The kernel drops
    it when the process ends, however it ends; `release` (or garbage collection) drops it too."""

    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / LOCK_FILE
        previous = _HELD.pop(self.path.resolve(), None)
        if previous is not None:  # an earlier run of this process that raised and was not released
            previous.release()
        self._file = self.path.open("a+", encoding="utf-8")
        try:
            fcntl.flock(self._file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._file.seek(0)
            holder = self._file.read().strip() or "unknown"
            self._file.close()
            raise ConfigError(
                f"{run_dir} is in use by another run (PID {holder}); wait for it to finish, stop it, "
                "or choose another --run-dir"
            ) from None
        self._file.seek(0)
        self._file.truncate()
        self._file.write(f"{os.getpid()}\n")
        self._file.flush()
        _HELD[self.path.resolve()] = self

    def release(self) -> None:
        if not self._file.closed:
            self._file.close()  # closing drops the lock
        if _HELD.get(self.path.resolve()) is self:
            del _HELD[self.path.resolve()]

    def __enter__(self) -> RunDirLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def checkpoint_steps(run_dir: str | os.PathLike) -> list[int]:
    """The steps of the complete checkpoints under ``run_dir/checkpoints``, in order."""
    root = Path(run_dir) / "checkpoints"
    if not root.is_dir():
        return []
    steps = [
        int(m.group(1))
        for p in root.iterdir()
        if (m := _STEP_DIR.fullmatch(p.name)) and (p / _MARKER).is_file()
    ]
    return sorted(steps)


def claim_run_dir(
    run_dir: str | os.PathLike, *, resume: bool = False, overwrite: bool = False, lock: bool | None = None
) -> RunDirLock | None:
    """Check ``run_dir`` for a run and lock it; ``lock`` None locks in the main process only
    (``$RANK`` unset or 0: the other processes of a data-parallel run only check). Refused,
    with a `ConfigError` saying what to do: a directory that cannot be written, one another run
    holds, a fresh start where checkpoints are (unless ``overwrite``), and ``resume`` where
    there is none. Keep the returned lock for the run."""
    run_dir = check_writable_dir(run_dir, "--run-dir")
    if resume and overwrite:
        raise ConfigError("--resume continues a run and --overwrite starts it afresh; give one of them")
    held = None
    if lock or (lock is None and os.environ.get("RANK", "0") == "0"):
        run_dir.mkdir(parents=True, exist_ok=True)
        held = RunDirLock(run_dir)
    steps = checkpoint_steps(run_dir)
    problem = None
    if resume and not steps:
        problem = f"--resume: {run_dir} holds no checkpoint to resume from; drop --resume to start a new run"
    if not resume and not overwrite and steps:
        problem = (
            f"{run_dir} already holds a run (checkpoints up to step {steps[-1]}): add --resume to continue "
            "it, --overwrite to start afresh there (its later checkpoints are deleted), or choose another "
            "--run-dir"
        )
    if problem:
        if held is not None:
            held.release()
        raise ConfigError(problem)
    return held
