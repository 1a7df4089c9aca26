"""searchgym's environments in Gymnasium's registry, namespace ``searchgym/``.

Every env searchgym registers has an `EnvEntryPoint`: its factory (named by a string, so a
backend's heavy imports happen only when its env is made), then the episode terms of the env's
rubric, applied there once for every env, a user's included. ``searchgym.make(id)`` and
``gymnasium.make(id)`` (after ``import searchgym``) give the same env.
Every function here that looks an id up loads the installed plug-ins first
(`searchgym.registry.load_plugins`, once per process), so a plug-in's envs are there without an
import; ``gymnasium.make`` alone finds them after `searchgym.load_plugins()`.
"""

from __future__ import annotations

import functools
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
from gymnasium.envs.registration import load_env_creator

from searchgym.envs.rewards import RewardWeights
from searchgym.envs.rubric import with_rubric
from searchgym.envs.wrappers import TurnLimit
from searchgym.errors import ConfigError
from searchgym.registry import check_env_id, load_entry_point, load_plugins, takes, user_code

NAMESPACE = "searchgym"
DEFAULT_ENV = "searchgym/FictionalQA-BM25-v0"
"""The env that ``searchgym eval``, ``serve-env`` and every trainer adapter play when given none."""
_FACTORIES = "searchgym.envs.factories"

# (Gymnasium name, dataset name in searchgym.tasks.datasets)
BENCHMARK_ENVS = (
    ("NQ", "nq"),
    ("TriviaQA", "triviaqa"),
    ("PopQA", "popqa"),
    ("HotpotQA", "hotpotqa"),
    ("2WikiMultihopQA", "2wikimultihopqa"),
    ("MuSiQue", "musique"),
    ("Bamboogle", "bamboogle"),
)
# (Gymnasium name part, backend in searchgym.envs.backends) for the generated world and mini-wiki
RETRIEVAL_BACKENDS = (
    ("BM25", "bm25"),
    ("Dense", "dense"),
    ("Hybrid", "hybrid"),
    ("Lucene", "lucene"),
    ("Rerank", "rerank"),
)


def register(
    id: str,
    entry_point: str | Callable[..., gym.Env] | None = None,
    *,
    tasks: Any = None,
    retriever: Any = None,
    **kwargs: Any,
) -> None:
    """Register an environment so that `make` (and ``gymnasium.make``) can build it.

    ``id`` has the form ``namespace/Name-vN``. Either give ``tasks`` and ``retriever`` — a
    question-answering `SearchEnv` over them (`searchgym.envs.factories.qa_env`: tasks as `Task`,
    ``{"question", "answers"}`` or ``(question, answers)``, or a dict of those by split; any
    object with ``search(query, k) -> list[Doc]``) — or an ``entry_point`` (a factory or
    ``"module:attr"``) that returns any ``gymnasium.Env``. Every registered env takes
    ``max_turns`` (default 8): a factory that does not is put under a `TurnLimit`. ``kwargs`` go to
    ``gymnasium.register`` (e.g. ``kwargs={...}``, the entry point's default arguments).

    >>> from searchgym.retrievers import BM25, Doc
    >>> register("doc/Tiny-v0", tasks=[("Capital of France?", ["Paris"])],
    ...          retriever=BM25.build([Doc("1", "Paris", "Paris is the capital of France.")]))
    >>> make("doc/Tiny-v0").reset(seed=0)[1]["question"]
    'Capital of France?'
    """
    if id in gym.registry:
        raise ConfigError(f"{id!r} is already registered; bump its version (-vN) to change it")
    if "/" not in id or not id.rsplit("-v", 1)[-1].isdigit():
        raise ConfigError(f"env ids look like 'namespace/Name-v0', got {id!r}")
    if (entry_point is None) == (tasks is None and retriever is None):
        raise ConfigError(
            "register an env with tasks=... and retriever=... (a QA env over them), or with entry_point=... "
            "(a factory returning a gymnasium.Env), not both"
        )
    if entry_point is None:
        if tasks is None or retriever is None:
            raise ConfigError("a QA env needs both tasks=... and retriever=...")
        if not callable(getattr(retriever, "search", None)):
            raise ConfigError(
                f"retriever must have search(query, k) -> list[Doc], got {type(retriever).__name__}"
            )
        from searchgym.envs.factories import qa_env  # lazy: retrievers, tasks and models (0.6 s)

        entry = EnvEntryPoint(functools.partial(qa_env, tasks, retriever))
    else:
        entry = EnvEntryPoint(entry_point, user=True)
    gym.register(id=id, entry_point=entry, **kwargs)


@dataclass(frozen=True)
class EnvEntryPoint:
    """The Gymnasium entry point of every env searchgym registers: the env ``factory`` (a
    callable or ``"module:attr"``, loaded at the first make), then `with_rubric`, which adds the
    episode terms of the env's rubric to the step that ends an episode. So `make` applies them
    once, for every env, as Gymnasium's ``make`` applies the wrappers a spec names.

    A ``user`` factory is called with the keyword arguments it takes (a clear error for the
    others), under a `TurnLimit` of ``max_turns`` unless it takes ``max_turns`` itself, and what it
    raises becomes a `ConfigError` naming it; searchgym's own factories take ``max_turns``."""

    factory: str | Callable[..., gym.Env]
    user: bool = False

    def load(self) -> Callable[..., gym.Env]:
        """The factory itself (the function whose parameters say which options the env takes)."""
        if not isinstance(self.factory, str):
            return self.factory
        return load_entry_point(self.factory) if self.user else load_env_creator(self.factory)

    def __call__(self, **kwargs: Any) -> gym.Env:
        return with_rubric(self._user_env(**kwargs) if self.user else self.load()(**kwargs))

    def _user_env(self, max_turns: int = 8, **kwargs: Any) -> gym.Env:
        factory = self.load()
        name = getattr(factory, "__name__", factory)
        unknown = sorted(k for k in kwargs if not takes(factory, k))
        if unknown:
            raise ConfigError(
                f"{name!r} takes no {', '.join(map(repr, unknown))}: add "
                f"{'it' if len(unknown) == 1 else 'them'} to its parameters (searchgym train passes split, "
                "max_turns and rewards; searchgym eval passes the -E options)"
            )
        with user_code(f"the env factory {name!r}"):
            if takes(factory, "max_turns"):
                return factory(max_turns=max_turns, **kwargs)
            if max_turns < 1:
                raise ConfigError(f"max_turns must be at least 1, got {max_turns}")
            return TurnLimit(factory(**kwargs), max_turns)


def env_takes(id: str, option: str) -> bool:
    """Whether env ``id``'s factory takes ``option`` (by name, or through ``**options``).

    >>> env_takes("searchgym/FictionalQA-BM25-v0", "protocol")
    True
    >>> env_takes("searchgym/FictionalQA-SelfSearch-v0", "protocol")  # it speaks tags only
    False
    """
    return takes(env_factory(id), option)


def env_factory(id: str) -> Callable[..., Any]:
    """The factory env ``id`` is made by, whose parameters say which options it takes (a
    registered id; Gymnasium's own envs give their entry point, loaded)."""
    entry = gym.spec(id).entry_point
    if isinstance(entry, EnvEntryPoint):
        return entry.load()
    return load_env_creator(entry) if isinstance(entry, str) else entry


def make(id: str, **kwargs: Any) -> gym.Env:
    """Build a registered environment; an unknown id suggests the closest registered ones
    (`searchgym.registry.check_env_id`)."""
    check_env_id(id)
    return gym.make(id, **kwargs)


def check_rewards(id: str, rewards: dict[str, Any]) -> None:
    """Raise `ConfigError` if ``rewards`` are not weights env ``id`` takes, without making it: the
    weights class is the one its factory's ``rewards`` parameter is annotated with (the
    planner's `PlannerRewards` adds ``per_turn``), `RewardWeights` by default. An unregistered
    id is left for `make` to report."""
    load_plugins()
    weights_class(env_factory(id) if id in gym.registry else None).parse(rewards)


def weights_class(factory: Any) -> type[RewardWeights]:
    """The `RewardWeights` class in ``factory``'s ``rewards`` annotation (`RewardWeights` if none).

    >>> from searchgym.envs.planner_factories import fictional_planner
    >>> weights_class(fictional_planner).__name__, weights_class(lambda rewards=None: None).__name__
    ('PlannerRewards', 'RewardWeights')
    """
    try:
        hint = typing.get_type_hints(factory).get("rewards")
    except (TypeError, NameError):  # not a function, or annotations that name what is not imported
        return RewardWeights
    options = typing.get_args(hint) or (hint,)
    return next((t for t in options if isinstance(t, type) and issubclass(t, RewardWeights)), RewardWeights)


def list_ids(namespace: str | None = NAMESPACE) -> list[str]:
    """Registered env ids (the plug-ins' included), sorted; ``namespace=None`` lists every namespace."""
    load_plugins()
    return sorted(
        env_id for env_id, spec in gym.registry.items() if namespace is None or spec.namespace == namespace
    )


def _register_builtin() -> None:
    builtin = [
        *(
            (f"{NAMESPACE}/{family}-{name}-v0", f"{_FACTORIES}:{factory}", {"backend": backend})
            for family, factory in (("FictionalQA", "fictional_qa"), ("MiniWiki", "mini_wiki"))
            for name, backend in RETRIEVAL_BACKENDS
        ),
        *(
            (f"{NAMESPACE}/{name}-BM25-v0", f"{_FACTORIES}:benchmark_qa", {"dataset": dataset})
            for name, dataset in BENCHMARK_ENVS
        ),
        (f"{NAMESPACE}/FictionalQA-SelfSearch-v0", f"{_FACTORIES}:fictional_self_search", {}),
        (f"{NAMESPACE}/FictionalQA-Simulated-v0", f"{_FACTORIES}:fictional_simulated", {}),
        (f"{NAMESPACE}/FictionalQA-Planner-v0", "searchgym.envs.planner_factories:fictional_planner", {}),
        (f"{NAMESPACE}/FictionalQA-Web-v0", "searchgym.envs.web_factories:fictional_web", {}),
        (f"{NAMESPACE}/FictionalQA-Propose-v0", "searchgym.envs.self_play:fictional_propose", {}),
        (f"{NAMESPACE}/MiniWiki-Web-v0", "searchgym.envs.web_factories:mini_wiki_web", {}),
        (f"{NAMESPACE}/FanOutQA-BM25-v0", f"{_FACTORIES}:fanout_qa", {"backend": "bm25"}),
    ]
    for env_id, entry_point, kwargs in builtin:
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point=EnvEntryPoint(entry_point), kwargs=kwargs)


_register_builtin()
