"""The fenced code blocks of the README and the docs pages, and the shell helpers of the tests that
run them verbatim.

`test_doc_pages.py` checks that every block of every page is named in its ``BLOCKS`` by a test, and
`test_readme_blocks.py` does the same for the README.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
BIN = Path(sys.executable).parent
_FENCE = re.compile(r"^```(\w+)[^\n]*\n(.*?)^```", re.M | re.S)
# The shortening the docs name for a train command (`--set KEY=VALUE`, `--set model=PATH`)
SHORT = (
    "--set steps=1 --set warm_start_episodes=4 --set eval_tasks=4 --set tasks_per_step=2 --set group_size=2"
)
# and for the reward study (its own flags for steps and dev tasks, then the same `--set`)
STUDY_SHORT = "--steps 1 --eval-tasks 4 --set tasks_per_step=2 --set group_size=2"
# with the tiny random model, which has 2 decoder blocks, not the 15 the quickstart trains
TINY = "--set trainable_layers=0"


def page_blocks(page: str) -> list[tuple[str, str]]:
    """``(language, code)`` of each fenced block of ``docs/PAGE``, in order."""
    return _FENCE.findall((DOCS / page).read_text())


def doc_block(page: str, language: str, index: int = 0) -> str:
    """The code of the ``index``-th ``language`` block of ``docs/PAGE``."""
    return [code for lang, code in page_blocks(page) if lang == language][index]


def environ(**env: str) -> dict[str, str]:
    """This process's environment with this venv's commands first on the PATH, and ``env``."""
    return {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "PYTHONUNBUFFERED": "1", **env}


def bash(script: str, cwd: Path, timeout: float = 900, **env: str) -> subprocess.CompletedProcess:
    """``script`` run by bash from ``cwd``; it must succeed."""
    result = subprocess.run(["bash", "-eo", "pipefail", "-c", script], cwd=cwd, env=environ(**env),
                            capture_output=True, text=True, timeout=timeout)  # fmt: skip
    assert result.returncode == 0, f"{script}\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
    return result


def serve(command: str, cwd: Path, url: str, **env: str) -> subprocess.Popen:
    """Start a server command and wait until ``url`` answers."""
    # a session of its own, so that `stop` stops the server with the shell that started it
    server = subprocess.Popen(command, shell=True, cwd=cwd, env=environ(**env), stderr=subprocess.PIPE,
                              text=True, start_new_session=True)  # fmt: skip
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert server.poll() is None, server.stderr.read()[-3000:]
        try:
            urllib.request.urlopen(url, timeout=2)
            return server
        except OSError:
            time.sleep(0.5)
    stop(server)
    raise AssertionError(f"{command} did not answer at {url} within 120 s")


def stop(server: subprocess.Popen) -> None:
    """Stop the server and the shell that started it."""
    os.killpg(server.pid, signal.SIGTERM)
    server.wait(10)


def copy_configs(cwd: Path) -> None:
    shutil.copytree(ROOT / "configs", cwd / "configs")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
