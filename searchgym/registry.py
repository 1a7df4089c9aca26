"""One way to register what searchgym builds by name: agents, policy backends, retriever kinds and
reward functions (envs live in Gymnasium's registry, `searchgym.envs.registry`, in the same style).

Entry points are callables or lazy ``"module:attr"`` strings, so a backend's heavy imports happen
only when it is used. Wherever a registered name is accepted, a ``"module:attr"`` string naming
the object itself is accepted too (``--agent my_pkg.agents:MyAgent``). An unknown name suggests
the closest registered ones.

Installed packages register their own entries through the ``searchgym.plugins`` entry-point
group: each entry point names a module (imported) or a function (called with no arguments) that
calls the ``register_*`` functions. They are loaded once, the first time a registry is read::

    [project.entry-points."searchgym.plugins"]
    my_pkg = "my_pkg.searchgym_plugin:register"

>>> register_reward("answer_is_short", lambda episode: float(len(episode.prediction or "") < 20))
>>> REWARDS.resolve("answer_is_short")(type("E", (), {"prediction": "Paris"})())
1.0
"""

from __future__ import annotations

import difflib
import importlib
import importlib.metadata
import inspect
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from searchgym.errors import ConfigError

EntryPoint = str | Callable[..., Any]
PLUGIN_GROUP = "searchgym.plugins"


def load_entry_point(text: str) -> Any:
    """The object ``"module:attr"`` (``attr`` may be dotted) names; a clear error if it is not there.

    >>> load_entry_point("json:dumps").__name__
    'dumps'
    """
    module_name, sep, attr = text.partition(":")
    if not sep or not module_name or not attr:
        raise ConfigError(f"expected 'module:attr' (e.g. 'my_pkg.agents:MyAgent'), got {text!r}")
    try:
        obj: Any = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        raise ConfigError(
            f"cannot import {module_name!r} (named in {text!r}): {e}. Is it installed, or on PYTHONPATH?"
        ) from e
    for part in attr.split("."):
        if not hasattr(obj, part):
            public = [name for name in dir(obj) if not name.startswith("_")]
            close = difflib.get_close_matches(part, public, n=3, cutoff=0.5)
            hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
            raise ConfigError(f"{module_name!r} has no attribute {attr!r} (named in {text!r}).{hint}")
        obj = getattr(obj, part)
    return obj


def takes(fn: Callable[..., Any], parameter: str) -> bool:
    """Whether ``fn`` accepts the keyword argument ``parameter`` (by name, or through ``**kwargs``).

    >>> takes(lambda seed=0: None, "seed"), takes(lambda **kw: None, "seed"), takes(lambda: None, "seed")
    (True, True, False)
    """
    try:
        parameters = inspect.signature(fn).parameters
    except (TypeError, ValueError):  # a builtin without a signature
        return False
    return parameter in parameters or any(p.kind is p.VAR_KEYWORD for p in parameters.values())


@dataclass(frozen=True)
class Spec:
    """A registered entry: its name, entry point and the keyword arguments it is called with."""

    name: str
    entry_point: EntryPoint
    kwargs: dict[str, Any] = field(default_factory=dict)

    def load(self) -> Callable[..., Any]:
        return load_entry_point(self.entry_point) if isinstance(self.entry_point, str) else self.entry_point


class Registry:
    """Names of one kind of thing (``kind``, e.g. "agent") mapped to their entry points."""

    def __init__(self, kind: str, how_to_list: str) -> None:
        self.kind = kind
        self.how_to_list = how_to_list
        self._specs: dict[str, Spec] = {}

    def register(
        self,
        name: str,
        entry_point: EntryPoint,
        *,
        kwargs: dict[str, Any] | None = None,
        override: bool = False,
    ) -> None:
        """Register ``entry_point`` (a callable or ``"module:attr"``) as ``name``; ``kwargs`` are
        passed to it on every call. Registering a taken name needs ``override=True``."""
        if not isinstance(name, str) or not name or ":" in name:
            raise ConfigError(f"{self.kind} names are non-empty and have no ':', got {name!r}")
        if not (callable(entry_point) or (isinstance(entry_point, str) and ":" in entry_point)):
            raise ConfigError(
                f"the entry point of {self.kind} {name!r} must be a callable or a 'module:attr' string, "
                f"got {entry_point!r}"
            )
        if name in self._specs and not override:
            raise ConfigError(f"{self.kind} {name!r} is already registered; pass override=True to replace it")
        self._specs[name] = Spec(name, entry_point, dict(kwargs or {}))

    def names(self) -> list[str]:
        """Registered names (plug-ins included), in registration order."""
        load_plugins()
        return list(self._specs)

    def __contains__(self, name: object) -> bool:
        load_plugins()
        return name in self._specs

    def spec(self, name: str) -> Spec:
        """The entry registered as ``name``, or one made on the spot for a ``"module:attr"`` name."""
        load_plugins()
        if name in self._specs:
            return self._specs[name]
        if ":" in name:
            return Spec(name, name)
        close = difflib.get_close_matches(name, self._specs, n=3, cutoff=0.5)
        hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
        raise ConfigError(
            f"unknown {self.kind} {name!r}.{hint} Known: {', '.join(self._specs)} ({self.how_to_list}); "
            f"or name your own as 'module:attr'"
        )

    def resolve(self, name: str) -> Callable[..., Any]:
        """The object registered as (or named by) ``name``."""
        return self.spec(name).load()

    def make(self, name: str, /, *args: Any, **kwargs: Any) -> Any:
        """Call ``name``'s entry point with ``args``, its registered keyword arguments and ``kwargs``."""
        spec = self.spec(name)
        return spec.load()(*args, **{**spec.kwargs, **kwargs})


AGENTS = Registry("agent", "searchgym.list_agents()")
"""Agent factories; called with ``seed`` when their signature takes it (`searchgym.agents.make_agent`)."""
POLICIES = Registry("policy backend", "searchgym.list_policies()")
"""Policy classes by backend (``hf``, ``cpu``, ``cpu-bf16``, ``vllm``, ``openai``), called as
``cls(model, seed=...)``."""
RETRIEVERS = Registry("retriever kind", "searchgym.list_retrievers()")
"""Index classes with ``build(docs, **options)``, ``save(directory)`` and ``load(directory)``."""
REWARDS = Registry("reward function", "searchgym.list_rewards()")
"""Episode reward terms: ``fn(episode) -> float`` (`searchgym.envs.rubric`)."""


def register_agent(name: str, entry_point: EntryPoint, **kwargs: Any) -> None:
    """Make an agent nameable (``searchgym eval --agent NAME``): ``entry_point`` returns an object
    with ``reset(info)`` and ``act(observation) -> str``; it gets ``seed`` if it takes one."""
    AGENTS.register(name, entry_point, kwargs=kwargs)


def register_policy(name: str, entry_point: EntryPoint, **kwargs: Any) -> None:
    """Make a policy backend nameable as ``NAME:MODEL``: ``entry_point(model, seed=...)``."""
    POLICIES.register(name, entry_point, kwargs=kwargs)


def register_retriever(name: str, entry_point: EntryPoint) -> None:
    """Make an index kind buildable (``searchgym index build --kind NAME``) and servable."""
    RETRIEVERS.register(name, entry_point)


def register_reward(name: str, entry_point: EntryPoint) -> None:
    """Make a reward term nameable in ``rewards: {terms: {NAME: weight}}``: ``fn(episode) -> float``."""
    REWARDS.register(name, entry_point)


def list_agents() -> list[str]:
    return AGENTS.names()


def list_policies() -> list[str]:
    return POLICIES.names()


def list_retrievers() -> list[str]:
    return RETRIEVERS.names()


def list_rewards() -> list[str]:
    return REWARDS.names()


_plugins_loaded = False


def load_plugins() -> None:
    """Load the installed packages' ``searchgym.plugins`` entry points, once per process. A plug-in
    that fails to load is reported as a warning; the rest still load."""
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    for entry in importlib.metadata.entry_points(group=PLUGIN_GROUP):
        try:
            loaded = entry.load()
            if callable(loaded):
                loaded()
        except Exception as e:  # a broken third-party plug-in must not take searchgym down
            warnings.warn(
                f"searchgym plug-in {entry.name!r} ({entry.value}) failed to load: {type(e).__name__}: {e}",
                stacklevel=2,
            )


def _register_builtin() -> None:
    scripted = "searchgym.agents.scripted"
    AGENTS.register("oracle", f"{scripted}.baselines:OracleAgent")
    # Verifying in most episodes, not half: warm-started on a coin flip, the greedy policy did not
    # verify (2.00 searches on 2-hop questions), so a cost had no waste to train away.
    AGENTS.register("wasteful-oracle", f"{scripted}.baselines:OracleAgent", kwargs={"p_verify": 0.8})
    AGENTS.register("heuristic", f"{scripted}.baselines:HeuristicAgent")
    AGENTS.register("random", f"{scripted}.baselines:RandomAgent")
    for k in range(5):
        AGENTS.register(f"planner-{k}", f"{scripted}.planners:FixedPlanner", kwargs={"k": k})
    AGENTS.register("planner-question", f"{scripted}.planners:QuestionPlanner")
    policies = "searchgym.agents.policies"
    POLICIES.register("hf", f"{policies}.hf:HFPolicy")
    POLICIES.register("cpu", f"{policies}.cached:CachedPolicy")
    POLICIES.register("cpu-bf16", f"{policies}.cached:CachedPolicy", kwargs={"rollout_dtype": "bfloat16"})
    POLICIES.register("vllm", f"{policies}.vllm:VLLMPolicy")
    POLICIES.register("openai", f"{policies}.openai:from_environment")
    RETRIEVERS.register("bm25", "searchgym.retrievers.bm25:BM25")
    RETRIEVERS.register("dense", "searchgym.retrievers.dense:Dense")
    RETRIEVERS.register("lucene", "searchgym.retrievers.lucene:Lucene")
    REWARDS.register("evidence_recall", "searchgym.envs.rubric:evidence_recall")


_register_builtin()
