"""Fixtures of the adapters' tests: a user's own envs (tests/user_env.py), defined outside searchgym."""

from __future__ import annotations

import sys

import gymnasium as gym
import pytest
from user_env import IMPORTED_ENV, IMPORTED_MODULE, PLUGIN_ENV, install_plugin, write_module

from searchgym import registry


@pytest.fixture(scope="session")
def user_site(tmp_path_factory):
    """The directory ``searchgym-mylab`` is pip-installed into (for ``PYTHONPATH``)."""
    return install_plugin(tmp_path_factory.mktemp("user-env"))


@pytest.fixture
def user_envs(user_site, tmp_path, monkeypatch):
    """This process as a fresh one of a user's: ``searchgym-mylab`` installed (its dist-info on the
    path), ``mylab_turing.py`` in the current directory, neither imported, the plug-ins not loaded
    yet. What they register is undone after the test. Returns the current directory."""
    write_module(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(user_site))  # sys.path is restored after the test
    monkeypatch.setattr(registry, "_plugins_loaded", False)
    yield tmp_path
    for env_id in (PLUGIN_ENV, IMPORTED_ENV):
        gym.registry.pop(env_id, None)
    for module in [m for m in sys.modules if m.split(".")[0] in ("searchgym_mylab", IMPORTED_MODULE)]:
        del sys.modules[module]
