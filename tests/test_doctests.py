"""The `>>>` examples in docstrings are part of the documentation: they must run."""

import doctest
import importlib
import pkgutil

import pytest


def modules() -> list[str]:
    names = ["searchgym", "searchgym.errors", "searchgym.files", "searchgym.plots"]
    names += ["searchgym.config_types", "searchgym.run_dir", "searchgym.hub", "searchgym.commands.common"]
    for sub in ("envs", "agents", "retrievers", "tasks"):
        package = importlib.import_module(f"searchgym.{sub}")
        names.append(package.__name__)
        names += [m.name for m in pkgutil.walk_packages(package.__path__, f"{package.__name__}.")]
    return sorted(names)


MODULES = modules()


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed"
