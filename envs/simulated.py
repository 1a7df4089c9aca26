"""`SimulatedSearchEnv`: a `SearchEnv` whose search engine is a language model (ZeroSearch).

The retriever is a `searchgym.retrievers.simulated.Simulated` over a live `TextGenerator`
(usually a loaded policy) that the user passes to ``searchgym.make(id, generator=policy)``.
Gymnasium keeps make's keyword arguments in ``env.spec``, and its wrappers deep-copy that spec:
a model would be copied once per env made, and a generator that holds a lock or a connection
would make ``make`` fail. This env keeps the generator in its spec by reference instead
(`SharedGeneratorSpec`), so ``gymnasium.make(env.spec)`` makes another env on the same model.
"""

from __future__ import annotations

from searchgym.envs.search_env import SearchEnv
from searchgym.envs.text_env import SHARED_KWARGS as SHARED_KWARGS
from searchgym.envs.text_env import SharedGeneratorSpec


class SimulatedSearchEnv(SharedGeneratorSpec, SearchEnv):
    """`SearchEnv` over its own `Simulated` retriever, which it closes with itself (the
    retriever may hold a cache file); ``env.spec`` shares the generator rather than copying it."""

    def close(self) -> None:
        super().close()
        self.retriever.close()
