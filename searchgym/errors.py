"""The exceptions searchgym raises on purpose. A leaf module: every layer may import it."""

from __future__ import annotations

import importlib
from types import ModuleType


class SearchGymError(Exception):
    """Base class of every error searchgym raises on purpose."""


class ConfigError(SearchGymError, ValueError):
    """A configuration value or argument is invalid; the message says how to fix it."""


class DataNotFoundError(SearchGymError, FileNotFoundError):
    """A dataset, corpus or index is not where it was looked for; the message names the script
    that creates it."""


class DependencyNotInstalled(SearchGymError, ImportError):
    """An optional dependency is missing; the message names the pip extra that provides it."""


def import_optional(module: str, extra: str) -> ModuleType:
    """Import ``module`` or raise `DependencyNotInstalled` naming ``searchgym[extra]``.

    >>> import_optional("json", "dev").__name__
    'json'
    """
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise DependencyNotInstalled(
            f'{module!r} is not installed; install it with: pip install "searchgym[{extra}]"'
        ) from e


class RetrieverError(SearchGymError):
    """A retriever could not answer (timeout, server down, bad response). Environments catch it
    and show it to the agent as an observation; it never ends an episode."""


class PolicyError(SearchGymError):
    """A policy backend could not generate (server down, request refused, retries exhausted);
    the message names the endpoint and the reason."""


class TrainingDiverged(SearchGymError, FloatingPointError):
    """The training loss or gradient became NaN or infinite; the weights were not updated and the
    last checkpoint is intact."""


class EnvContractError(SearchGymError, TypeError):
    """An environment does not report what searchgym's rollout and trainer read (a key of its
    ``info``, its ``tasks`` or ``protocol``); the message names what is missing and how to add it."""
