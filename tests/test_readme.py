"""The README's first lines are the two commands a new user runs; keep them true."""

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def readme_commands() -> list[str]:
    block = re.search(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), re.S).group(1)
    return [line for line in block.splitlines() if line.strip() and not line.startswith("#")]


def test_two_commands_with_the_same_setup_as_ci():
    main_job, tests = readme_commands()
    setup = main_job.rsplit(" && ", 1)[0]
    assert tests.rsplit(" && ", 1)[0] == setup
    assert "torch==2.13.0" in setup  # never an unpinned torch: it would pull CUDA on a CPU machine
    ci = (ROOT / ".ci" / "run").read_text()
    install = setup.split(" && ")[-1].replace("pip install", "pip install --quiet")
    assert install in ci
    assert tests.rsplit(" && ", 1)[1] in ci


@pytest.mark.slow
def test_quickstart_main_job_runs(tmp_path):
    main_job, _ = readme_commands()
    run = shlex.split(main_job.rsplit(" && ", 1)[1])
    assert run[0] == "searchgym"
    exe = Path(sys.executable).parent / "searchgym"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    result = subprocess.run(
        [str(exe), *run[1:], "--no-progress"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert result.returncode == 0, result.stderr
    rows = {tuple(line.split()[:2]): line.split() for line in result.stdout.splitlines() if line.strip()}
    assert float(rows[("oracle", "all")][3]) >= 0.99
    assert float(rows[("random", "all")][3]) <= 0.05
    heuristic = float(rows[("heuristic", "all")][3])
    assert 0.05 < heuristic < 0.99
    out = tmp_path / "runs" / "eval" / "searchgym_FictionalQA-BM25-v0"
    assert {p.name for p in out.iterdir()} >= {"oracle.jsonl", "heuristic.jsonl", "random.jsonl", "em.png"}


def test_usage_example_runs(capsys):
    block = re.search(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S).group(1)
    namespace: dict = {}
    exec(compile(block, "README.md", "exec"), namespace)
    info = namespace["info"]
    assert namespace["terminated"] and info["n_searches"] == 1 and info["em"] in (0.0, 1.0)
    assert capsys.readouterr().out.startswith(info["prediction"])
