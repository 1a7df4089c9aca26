"""The `>>>` examples in docstrings are part of the documentation: they must run."""

import doctest
import importlib
import pkgutil

import pytest

from searchgym.errors import DependencyNotInstalled

# Adapters whose package cannot share the main venv (.ci/side-venvs): their doctests run in their
# side venv's tests (tests/agents/integrations/test_verl_adapter.py, test_verifiers_env.py).
SIDE_VENV_MODULES = {
    "searchgym.agents.integrations.verl": "verl",
    "searchgym.agents.integrations.verifiers.v0_4": "verifiers",
    "searchgym.agents.integrations.verifiers.v0_3": "verifiers",
}


def modules() -> list[str]:
    """Every module of the package: ``searchgym``'s own folder and the sub-packages it maps."""
    names = []
    for sub in ("", ".envs", ".agents", ".retrievers", ".tasks"):
        package = importlib.import_module(f"searchgym{sub}")
        names.append(package.__name__)
        names += [m.name for m in pkgutil.walk_packages(package.__path__, f"{package.__name__}.")]
    return sorted(set(names))


MODULES = modules()


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    try:
        module = importlib.import_module(name)
    except DependencyNotInstalled:
        if name not in SIDE_VENV_MODULES:
            raise
        pytest.skip(f"{SIDE_VENV_MODULES[name]} is not in this venv; its side venv's tests run its examples")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed"
