"""A user's own envs, defined outside searchgym, for the adapters' tests: what a lab writes.

- ``searchgym-mylab``, a real distribution (`install_plugin` pip-installs it into a directory of its
  own, to put on ``PYTHONPATH``): its entry point in the ``searchgym.plugins`` group registers
  `PLUGIN_ENV` when searchgym loads its plug-ins;
- ``mylab_turing``, a plain module that is no package (`write_module`): importing it registers
  `IMPORTED_ENV`; adapters' configs name it in their import key.

Both are small QA envs over two passages whose tasks carry their evidence chain, so the scripted
oracle answers them (EM 1) in one search.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PLUGIN_ENV = "mylab/History-v0"
IMPORTED_ENV = "mylab/Turing-v0"
IMPORTED_MODULE = "mylab_turing"

DOCS = """
from searchgym.retrievers import BM25, Doc

DOCS = [Doc("d1", "Ada Lovelace", "Ada Lovelace published the first program in 1843."),
        Doc("d2", "Alan Turing", "Alan Turing described his machine in 1936.")]


def task(i, question, answer, doc, query):
    return {"id": f"q{i}", "question": question, "answers": [answer], "evidence": [doc],
            "metadata": {"chain": [{"query": query}]}}


ADA = task(0, "When did Ada Lovelace publish the first program?", "1843", "d1", "Ada Lovelace program")
TURING = task(1, "When did Alan Turing describe his machine?", "1936", "d2", "Alan Turing machine")
"""

PLUGIN = """
import searchgym
from searchgym_mylab.docs import ADA, DOCS, TURING
from searchgym.retrievers import BM25


def register():
    searchgym.register("mylab/History-v0", tasks=[ADA, TURING], retriever=BM25.build(DOCS))
"""

PYPROJECT = """
[build-system]
requires = ["setuptools>=69"]
build-backend = "setuptools.build_meta"

[project]
name = "searchgym-mylab"
version = "0.1"

[tool.setuptools]
packages = ["searchgym_mylab"]

[project.entry-points."searchgym.plugins"]
mylab = "searchgym_mylab:register"
"""

MODULE = (
    DOCS
    + """
import searchgym

searchgym.register("mylab/Turing-v0", tasks=[TURING], retriever=BM25.build(DOCS))
"""
)


def install_plugin(root: Path) -> Path:
    """Build and install ``searchgym-mylab`` with pip into ``root/site`` (no index, no
    dependencies); the directory to put on ``PYTHONPATH``, where its dist-info carries the entry
    point. Pure Python, so every venv of the same Python reads it."""
    package = root / "pkg" / "searchgym_mylab"
    package.mkdir(parents=True)
    (root / "pkg" / "pyproject.toml").write_text(PYPROJECT)
    (package / "__init__.py").write_text(PLUGIN)
    (package / "docs.py").write_text(DOCS)
    site = root / "site"
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
               "--no-index", "--target", str(site), str(root / "pkg")]  # fmt: skip
    subprocess.run(command, check=True, capture_output=True, timeout=300)
    if not list(site.glob("searchgym_mylab-0.1.dist-info/entry_points.txt")):
        raise AssertionError(f"pip installed no entry points into {site}")
    return site


def write_module(directory: Path) -> Path:
    """``mylab_turing.py`` in ``directory`` (which must be the current directory or on the path of
    whoever imports it); its path."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{IMPORTED_MODULE}.py"
    path.write_text(MODULE)
    return path


__all__ = ["IMPORTED_ENV", "IMPORTED_MODULE", "PLUGIN_ENV", "install_plugin", "write_module"]
