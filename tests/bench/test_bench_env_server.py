"""bench/env_server.py runs end to end on a few episodes and prints every transport's row."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ROWS = (
    "searchgym in process",
    "searchgym WebSocket, 1 client(s)",
    "searchgym WebSocket, 2 client(s)",
    "searchgym MCP over HTTP, 1 client",
    "GEM QaEnv+SearchTool (peer)",
)


@pytest.mark.slow
def test_every_transport_and_the_peer_are_measured():
    command = [sys.executable, str(ROOT / "bench" / "env_server.py"), "--episodes", "6", "--clients", "2"]
    run = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.splitlines()
    assert lines[0].startswith("6 oracle episodes of searchgym/FictionalQA-BM25-v0")
    for row in ROWS:
        line = next(line for line in lines if line.startswith(row))
        numbers = [float(x) for x in re.findall(r"\d+\.\d+", line[len(row) :])]
        assert len(numbers) == 5 and all(x > 0 for x in numbers), line
    assert next(line for line in lines if line.startswith(ROWS[0])).split()[-2:] == ["1.0", "1.000"]
