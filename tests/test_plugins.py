"""User code without editing searchgym: a real plug-in package, installed with pip into the test's
own directory, registers an env, an agent and a reward through the ``searchgym.plugins``
entry-point group; ``--agent module:attr`` and ``--import MODULE`` name a user's own module."""

import importlib.metadata
import json
import os
import subprocess
import sys
import textwrap

import pytest

from searchgym import registry
from searchgym.cli import main

PLUGIN = '''
import re

import searchgym
from searchgym.retrievers import BM25, Doc

DOCS = [Doc("d1", "Ada Lovelace", "Ada Lovelace published the first program in 1843."),
        Doc("d2", "Alan Turing", "Alan Turing described his machine in 1936.")]


class YearAgent:
    """Searches the question once, then answers the first year in the results."""

    def reset(self, info):
        self.question, self.searched = info["question"], False

    def act(self, observation):
        if not self.searched:
            self.searched = True
            return f"<search> {self.question} </search>"
        return "<answer> " + re.findall(r"\\b1\\d{3}\\b", observation)[0] + " </answer>"


def register():
    searchgym.register("plugdemo/History-v0", retriever=BM25.build(DOCS),
                       tasks=[("When did Ada Lovelace publish the first program?", "1843"),
                              ("When did Alan Turing describe his machine?", "1936")])
    searchgym.register_agent("plugdemo-years", YearAgent)
    searchgym.register_reward("plugdemo-short", lambda episode: float(len(episode.prediction or "") <= 4))
'''

PYPROJECT = """
[build-system]
requires = ["setuptools>=69"]
build-backend = "setuptools.build_meta"

[project]
name = "searchgym-plugdemo"
version = "0.1"

[project.entry-points."searchgym.plugins"]
plugdemo = "searchgym_plugdemo:register"
"""


MYLAB = """
import searchgym
from searchgym.retrievers import BM25
from searchgym_plugdemo import DOCS

TURING = ("When did Alan Turing describe his machine?", "1936")
searchgym.register("mylab/Turing-v0", tasks=[TURING], retriever=BM25.build(DOCS))
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The plug-in, pip-installed into a directory of its own (put on PYTHONPATH by `run`)."""
    root = tmp_path_factory.mktemp("plugin")
    (root / "pkg").mkdir()
    (root / "pkg" / "pyproject.toml").write_text(PYPROJECT)
    (root / "pkg" / "searchgym_plugdemo.py").write_text(textwrap.dedent(PLUGIN))
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
               "--no-index", "--target", str(root / "site"), str(root / "pkg")]  # fmt: skip
    subprocess.run(command, check=True, capture_output=True, timeout=300)
    assert list((root / "site").glob("searchgym_plugdemo-0.1.dist-info/entry_points.txt"))
    return root / "site"


def run(args, pythonpath, cwd):
    env = {**os.environ, "PYTHONPATH": str(pythonpath)}
    return subprocess.run([sys.executable, "-m", "searchgym.cli", *args], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=300)  # fmt: skip


def test_an_installed_plugin_registers_its_env_agent_and_reward(site, tmp_path):
    listed = run(["list", "--all"], site, tmp_path)
    assert "plugdemo/History-v0" in listed.stdout.split(), listed.stderr
    assert "plugdemo-years" in run(["list", "agents"], site, tmp_path).stdout.split()
    args = [
        "eval",
        "--env",
        "plugdemo/History-v0",
        "--agent",
        "plugdemo-years",
        "--n",
        "2",
        "--json",
        "--no-progress",
        "--out",
        str(tmp_path / "o"),
        "-E",
        "rewards={terms: {plugdemo-short: 1}}",
    ]
    result = run(args, site, tmp_path)
    assert result.returncode == 0, result.stderr
    metrics = json.loads(result.stdout)["agents"]["plugdemo-years"]["all"]
    assert metrics["em"] == 1.0 and metrics["searches"] == 1.0 and metrics["return"] == 2.0  # EM + short


def test_an_agent_named_module_attr_and_an_env_from_import(site, tmp_path):
    (tmp_path / "mylab.py").write_text(MYLAB)
    args = ["eval", "--import", "mylab", "--env", "mylab/Turing-v0", "--n", "1", "--json", "--no-progress",
            "--agent", "searchgym_plugdemo:YearAgent", "--out", str(tmp_path / "out")]  # fmt: skip
    result = run(args, site, tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["agents"]["searchgym_plugdemo:YearAgent"]["all"]["em"] == 1.0
    missing = run(["eval", "--import", "mylabb", "--n", "1"], site, tmp_path)
    assert missing.returncode == 2 and "--import mylabb: no module 'mylabb'" in missing.stderr


def test_python_lists_a_plugins_env_and_an_unknown_id_says_how_to_register_one(site, tmp_path):
    """searchgym.list_ids, in a process that never ran a command, loads the plug-ins first; an
    id nothing registers names --import and the entry-point group."""
    command = [sys.executable, "-c", "import searchgym; print(searchgym.list_ids(None))"]
    env = {**os.environ, "PYTHONPATH": str(site)}
    listed = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert "'plugdemo/History-v0'" in listed.stdout, listed.stderr
    result = run(["eval", "--env", "plugdemo/Histry-v0", "--n", "1", "--no-progress"], site, tmp_path)
    assert result.returncode == 2 and result.stderr.startswith(
        "searchgym: error: no environment 'plugdemo/Histry-v0' is registered. Did you mean "
        "'plugdemo/History-v0'? `searchgym list` shows them all; an env of your own is registered by "
        "importing its module first (--import MODULE) or by installing its package with an entry point "
        "in the 'searchgym.plugins' group (docs/plug-in.md)"
    )


BROKEN_PLUGINS = {
    "sg_plugin_exits:register": "import sys\n\ndef register():\n    sys.exit(3)\n",
    "sg_plugin_import_fails": "raise RuntimeError('half installed')\n",
    "sg_plugin_base:register": (
        "class Stop(BaseException):\n    pass\n\n\ndef register():\n    raise Stop('x')\n"
    ),
    "sg_plugin_fine:register": (
        "import searchgym\n\ndef register():\n"
        "    searchgym.register_agent('sg-plugin-agent', 'searchgym.agents.scripted.baselines:OracleAgent')\n"
    ),
    "sg_plugin_ctrl_c:register": "def register():\n    raise KeyboardInterrupt\n",
}


@pytest.fixture
def plugins(tmp_path, monkeypatch):
    """``install(*values)``: these entry points of `BROKEN_PLUGINS` become the installed plug-ins,
    loaded afresh by the next command (what they register is undone after the test)."""

    def install(*values):
        for value in values:
            module = value.split(":")[0]
            (tmp_path / f"{module}.py").write_text(BROKEN_PLUGINS[value])
        entries = [importlib.metadata.EntryPoint(v.split(":")[0], v, registry.PLUGIN_GROUP) for v in values]
        original = importlib.metadata.entry_points

        def entry_points(**selection):
            return entries if selection.get("group") == registry.PLUGIN_GROUP else original(**selection)

        monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)
        monkeypatch.setattr(registry, "_plugins_loaded", False)

    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry.AGENTS, "_specs", dict(registry.AGENTS._specs))
    return install


def test_a_plugin_that_exits_or_raises_is_skipped_in_one_line_and_the_command_goes_on(plugins, capsys):
    plugins("sg_plugin_exits:register", "sg_plugin_import_fails", "sg_plugin_base:register",
            "sg_plugin_fine:register")  # fmt: skip
    assert main(["list", "agents"]) == 0
    out, err = capsys.readouterr()
    assert "sg-plugin-agent" in out.split()  # the plug-in after the broken ones loaded
    assert err.splitlines() == [
        "searchgym: warning: searchgym plug-in 'sg_plugin_exits' (sg_plugin_exits:register) failed to load "
        "and is skipped: sys.exit(3)",
        "searchgym: warning: searchgym plug-in 'sg_plugin_import_fails' (sg_plugin_import_fails) failed to "
        "load and is skipped: RuntimeError: half installed",
        "searchgym: warning: searchgym plug-in 'sg_plugin_base' (sg_plugin_base:register) failed to load "
        "and is skipped: Stop: x",
    ]


def test_ctrl_c_while_a_plugin_loads_still_ends_the_command(plugins, capsys):
    plugins("sg_plugin_ctrl_c:register")
    assert main(["list", "agents"]) == 130
    assert capsys.readouterr().err == "searchgym: interrupted\n"
