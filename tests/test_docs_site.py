"""The docs site builds with `mkdocs build --strict` (no broken link, no page outside the nav), and
its generated reference pages list every registered env id and every command."""

import dataclasses
import os
import shutil
import subprocess
import sys
from pathlib import Path

from searchgym.agents.train.config import GRPOConfig
from searchgym.cli import COMMANDS, main
from searchgym.config_types import field_docs
from searchgym.envs.registry import list_ids

ROOT = Path(__file__).resolve().parents[1]


def test_the_site_builds_strictly_with_every_id_and_command(tmp_path):
    # as on a fresh clone: the hook lays out the API sources before mkdocstrings looks for them
    shutil.rmtree(ROOT / "build" / "api-src", ignore_errors=True)
    mkdocs = Path(sys.executable).parent / "mkdocs"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    run = subprocess.run(
        [str(mkdocs), "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    environments = (tmp_path / "site" / "reference" / "environments" / "index.html").read_text()
    for env_id in list_ids("searchgym"):
        assert f"<code>{env_id}</code>" in environments, env_id
    assert "max_obs_tokens" in environments and "tool_calls" in environments
    cli = (tmp_path / "site" / "reference" / "cli" / "index.html").read_text()
    for command in COMMANDS:
        assert f"<code>searchgym {command.replace('_', '-')}</code>" in cli, command
    assert "searchgym index build" in cli and "--max-sessions" in cli
    config = (tmp_path / "site" / "reference" / "config" / "index.html").read_text()
    for field in dataclasses.fields(GRPOConfig):
        assert f"<code>{field.name}</code>" in config, field.name
    api = (tmp_path / "site" / "reference" / "api" / "index.html").read_text()  # mkdocstrings
    assert (
        "A finished episode as reward terms see it" in api and 'id="searchgym.agents.train.grpo.train"' in api
    )
    assert '<span class="gp">&gt;&gt;&gt; </span>' in api and "<blockquote" not in api  # doctests are code


def test_every_config_key_is_documented_and_listed_by_the_cli(capsys):
    names = [f.name for f in dataclasses.fields(GRPOConfig)]
    docs = field_docs(GRPOConfig)
    assert sorted(docs) == sorted(names)  # a new key comes with its docstring
    assert all(len(doc.split()) >= 3 for doc in docs.values())
    assert main(["list", "config"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == names
    temperature = next(line for line in lines if line.startswith("temperature "))
    assert "1.0" in temperature and "Sampling temperature of the rollouts" in temperature
