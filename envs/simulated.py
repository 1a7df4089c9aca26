"""`SimulatedSearchEnv`: a `SearchEnv` whose search engine is a language model (ZeroSearch).

The retriever is a `searchgym.retrievers.simulated.Simulated` over a live `TextGenerator`
(usually a loaded policy) that the user passes to ``searchgym.make(id, generator=policy)``.
Gymnasium keeps make's keyword arguments in ``env.spec``, and its wrappers deep-copy that spec:
a model would be copied once per env made, and a generator that holds a lock or a connection
would make ``make`` fail. This env keeps the generator in its spec by reference instead, so
``gymnasium.make(env.spec)`` makes another env on the same model.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from gymnasium.envs.registration import EnvSpec

from searchgym.envs.search_env import SearchEnv

SHARED_KWARGS = ("generator",)


class _SharedKwargs(dict):
    """An env spec's keyword arguments: deep-copied as a dict is, except `SHARED_KWARGS`."""

    def __deepcopy__(self, memo: dict[int, Any]) -> _SharedKwargs:
        return _SharedKwargs(
            {k: v if k in SHARED_KWARGS else copy.deepcopy(v, memo) for k, v in self.items()}
        )


class SimulatedSearchEnv(SearchEnv):
    """`SearchEnv` over its own `Simulated` retriever, which it closes with itself (the
    retriever may hold a cache file); ``env.spec`` shares the generator rather than copying it."""

    _spec: EnvSpec | None = None

    @property  # type: ignore[override]  (gymnasium.Env declares spec as a plain attribute)
    def spec(self) -> EnvSpec | None:
        return self._spec

    @spec.setter
    def spec(self, spec: EnvSpec | None) -> None:
        if spec is not None and any(k in spec.kwargs for k in SHARED_KWARGS):
            spec = dataclasses.replace(spec, kwargs=_SharedKwargs(spec.kwargs))
        self._spec = spec

    def close(self) -> None:
        super().close()
        self.retriever.close()
