"""One way to register what searchgym builds by name: agents, policy backends, retriever kinds,
action protocols, task sets and reward functions (envs live in Gymnasium's registry,
`searchgym.envs.registry`, in the same style).

Entry points are callables or lazy ``"module:attr"`` strings, so a backend's heavy imports happen
only when it is used. Wherever a registered name is accepted, a ``"module:attr"`` string naming
the object itself is accepted too (``--agent my_pkg.agents:MyAgent``). An unknown name suggests
the closest registered ones.

Installed packages register their own entries through the ``searchgym.plugins`` entry-point
group: each entry point names a module (imported) or a function (called with no arguments) that
calls the ``register_*`` functions. They are loaded once, the first time a registry is read; one
that fails (an exception, ``sys.exit``) is skipped with a `PluginWarning` and the rest load::

    [project.entry-points."searchgym.plugins"]
    my_pkg = "my_pkg.searchgym_plugin:register"

>>> register_reward("answer_is_short", lambda episode: float(len(episode.prediction or "") < 20))
>>> REWARDS.resolve("answer_is_short")(type("E", (), {"prediction": "Paris"})())
1.0
"""

from __future__ import annotations

import contextlib
import difflib
import importlib
import importlib.metadata
import inspect
import os
import sys
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from searchgym.errors import ConfigError, SearchGymError

EntryPoint = str | Callable[..., Any]
PLUGIN_GROUP = "searchgym.plugins"


class PluginWarning(UserWarning):
    """An installed plug-in failed to load; searchgym goes on without it."""


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
        """The entry point itself; a `ConfigError` if ``"module:attr"`` names something not callable."""
        if not isinstance(self.entry_point, str):
            return self.entry_point
        obj = load_entry_point(self.entry_point)
        if not callable(obj):
            named = "" if self.name == self.entry_point else f" (the entry point of {self.name!r})"
            raise ConfigError(
                f"{self.entry_point!r}{named} is a {type(obj).__name__}, not a class or function to "
                "call; name the factory itself"
            )
        return obj


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
        """Call ``name``'s entry point with ``args``, its registered keyword arguments and ``kwargs``.
        A ``"module:attr"`` entry point (a user's own) that raises is a `ConfigError` naming it."""
        spec = self.spec(name)
        factory = spec.load()
        if name in self._specs:
            return factory(*args, **{**spec.kwargs, **kwargs})
        with user_code(f"{self.kind} {name!r}"):
            return factory(*args, **kwargs)


@contextlib.contextmanager
def user_code(what: str) -> Iterator[None]:
    """Run a user's factory: an exception (not one of searchgym's own) becomes a `ConfigError`
    that names ``what`` and the exception, chained to it (``searchgym --debug`` shows where).

    >>> with user_code("agent 'my_pkg:make'"):
    ...     raise ValueError("no index in ./data")
    Traceback (most recent call last):
    ...
    searchgym.errors.ConfigError: agent 'my_pkg:make' raised ValueError: no index in ./data
    """
    try:
        yield
    except SearchGymError:
        raise
    except Exception as e:
        raise ConfigError(f"{what} raised {describe_exception(e)}") from e


def describe_exception(e: BaseException) -> str:
    """An exception in one line: its type and message (``sys.exit(3)`` for a `SystemExit`).

    >>> describe_exception(SystemExit(3)), describe_exception(ValueError("two\\nlines"))
    ('sys.exit(3)', 'ValueError: two lines')
    """
    if isinstance(e, SystemExit):
        return f"sys.exit({e.code!r})" if e.code is not None else "sys.exit()"
    message = " ".join(str(e).split())
    return f"{type(e).__name__}: {message}" if message else type(e).__name__


AGENTS = Registry("agent", "searchgym.list_agents()")
"""Agent factories; called with ``seed`` when their signature takes it (`searchgym.agents.make_agent`)."""
POLICIES = Registry("policy backend", "searchgym.list_policies()")
"""Policy classes by backend (``hf``, ``cpu``, ``cpu-bf16``, ``vllm``, ``openai``), called as
``cls(model, seed=...)``."""
RETRIEVERS = Registry("retriever kind", "searchgym.list_retrievers()")
"""Retriever kinds: classes with ``build(docs, **options)``, built with their registered keyword
arguments as default options; those whose retrievers ``save(directory)`` and that ``load(directory)``
are index kinds (`searchgym.retrievers.index.RetrieverKind`). Envs' ``backend`` names one."""
PROTOCOLS = Registry("action protocol", "searchgym.list_protocols()")
"""Action protocols: `ActionProtocol` classes, called as ``cls(tools, goal=...)``
(`searchgym.envs.protocols.make_protocol`). Envs' ``protocol`` names one."""
TASK_SETS = Registry("task set", "searchgym.list_task_sets()")
"""Task set loaders, called as ``fn(split=..., **kwargs) -> TaskSet`` (`searchgym.tasks.load`)."""
REWARDS = Registry("reward function", "searchgym.list_rewards()")
"""Episode reward terms: ``fn(episode) -> float`` (`searchgym.envs.rubric`)."""
TRAINER_REWARDS = Registry("trainer reward term", "searchgym.list_rewards()")
"""Trainer reward terms, which read the trained policy: ``fn(episodes, scorer) -> values``, per
episode a value per turn (`searchgym.agents.train.rewards.TrainerTermFn`)."""


def register_agent(name: str, entry_point: EntryPoint, **kwargs: Any) -> None:
    """Make an agent nameable (``searchgym eval --agent NAME``): ``entry_point`` returns an object
    with ``reset(info)`` and ``act(observation) -> str``; it gets ``seed`` if it takes one."""
    AGENTS.register(name, entry_point, kwargs=kwargs)


def register_policy(name: str, entry_point: EntryPoint, **kwargs: Any) -> None:
    """Make a policy backend nameable as ``NAME:MODEL``: ``entry_point(model, seed=...)``."""
    POLICIES.register(name, entry_point, kwargs=kwargs)


def register_retriever(name: str, entry_point: EntryPoint, **options: Any) -> None:
    """Make a retriever kind nameable as an env's ``backend=NAME``: ``entry_point`` is a class with
    ``build(docs, **options)``, built with ``options`` unless given others. An index kind (its
    retrievers ``save(directory)``, it has ``load(directory)``) is also buildable with ``searchgym
    index build --kind NAME`` and servable (`searchgym.retrievers.index.RetrieverKind`)."""
    RETRIEVERS.register(name, entry_point, kwargs=options)


def register_protocol(name: str, entry_point: EntryPoint) -> None:
    """Make an action protocol nameable as an env's ``protocol=NAME``: ``entry_point`` is an
    `ActionProtocol` subclass (`searchgym.envs.protocols`), called as ``cls(tools, goal=...)``."""
    PROTOCOLS.register(name, entry_point)


def register_task_set(name: str, entry_point: EntryPoint, **kwargs: Any) -> None:
    """Make a task set loadable as ``searchgym.tasks.load(NAME, split, **options)``: ``entry_point``
    is called as ``fn(split=..., **kwargs, **options)`` and returns a `TaskSet`."""
    TASK_SETS.register(name, entry_point, kwargs=kwargs)


def register_reward(
    name: str, entry_point: EntryPoint, *, level: Literal["episode", "trainer"] = "episode"
) -> None:
    """Make a reward term nameable in ``rewards: {terms: {NAME: weight}}``: an ``episode`` term is
    ``fn(episode) -> float``, which every env scores when an episode ends; a ``trainer`` term is
    ``fn(episodes, scorer) -> [[value per turn] per episode]``, which `searchgym train` scores
    with the policy it trains (`searchgym.agents.train.rewards.TrainerTermFn`)."""
    if level not in ("episode", "trainer"):
        raise ConfigError(f"a reward term's level is 'episode' or 'trainer', got {level!r}")
    other = TRAINER_REWARDS if level == "episode" else REWARDS
    if name in other:
        raise ConfigError(
            f"{name!r} is already a {other.kind}; reward terms of both levels share one namespace"
        )
    (REWARDS if level == "episode" else TRAINER_REWARDS).register(name, entry_point)


def list_agents() -> list[str]:
    return AGENTS.names()


def list_policies() -> list[str]:
    return POLICIES.names()


def list_retrievers() -> list[str]:
    return RETRIEVERS.names()


def list_protocols() -> list[str]:
    return PROTOCOLS.names()


def list_task_sets() -> list[str]:
    return TASK_SETS.names()


def list_rewards() -> list[str]:
    """The reward terms ``rewards.terms`` may weigh: the episode terms, then the trainer's."""
    return REWARDS.names() + TRAINER_REWARDS.names()


_plugins_loaded = False


def load_plugins() -> None:
    """Load the installed packages' ``searchgym.plugins`` entry points, once per process. A plug-in
    that fails to load, by an exception or by calling ``sys.exit``, is reported as a
    `PluginWarning`; the rest still load (only Ctrl-C, `KeyboardInterrupt`, goes through)."""
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    for entry in importlib.metadata.entry_points(group=PLUGIN_GROUP):
        try:
            loaded = entry.load()
            if callable(loaded):
                loaded()
        except KeyboardInterrupt:
            raise
        except BaseException as e:  # a broken third-party plug-in must not take searchgym down
            warnings.warn(
                f"searchgym plug-in {entry.name!r} ({entry.value}) failed to load and is skipped: "
                f"{describe_exception(e)}",
                PluginWarning,
                stacklevel=2,
            )


IMPORT_HINT = "--import MODULE"
"""Where the command line names a module of the user's to import first (`use_env` takes others)."""


def check_env_id(env_id: str, import_hint: str = IMPORT_HINT) -> None:
    """A `ConfigError` unless ``env_id`` is in Gymnasium's registry (where `import searchgym` put
    searchgym's envs, and the plug-ins theirs), suggesting the closest ids that are not Gymnasium's
    own (its MuJoCo and Atari ids help no one looking for a search env) and saying how an env of
    one's own gets there: its module imported (``import_hint``, where the caller names one) or its
    package installed with an entry point in the `PLUGIN_GROUP`.

    >>> check_env_id("searchgym/FictionalQA-BM25-v0")
    """
    import gymnasium as gym

    load_plugins()
    if env_id in gym.registry:
        return
    ours = [i for i, spec in gym.registry.items() if not _is_gymnasiums(spec.entry_point)]
    close = difflib.get_close_matches(env_id, ours, n=3, cutoff=0.5)
    hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
    raise ConfigError(
        f"no environment {env_id!r} is registered.{hint} `searchgym list` shows them all; an env of your "
        f"own is registered by importing its module first ({import_hint}) or by installing its package "
        f"with an entry point in the {PLUGIN_GROUP!r} group (docs/plug-in.md)"
    )


def use_env(
    env_id: str,
    imports: str | Sequence[str] | None = None,
    *,
    key: str = "--import",
    directory: str | None = None,
) -> None:
    """Make ``env_id`` nameable where a trainer's config names it: load the installed plug-ins,
    import the user's modules ``imports`` (one name or a list, from ``directory``, by default the
    current one, or ``PYTHONPATH``; they register their envs when imported), then `check_env_id`.
    ``key`` is the config key that names the modules, for errors.

    >>> use_env("searchgym/FictionalQA-BM25-v0", ["json"], key="env_config.imports")
    >>> use_env("mylab/History-v0", key="env_config.imports")
    Traceback (most recent call last):
    ...
    searchgym.errors.ConfigError: no environment 'mylab/History-v0' is registered. `searchgym list` \
shows them all; an env of your own is registered by importing its module first (env_config.imports: \
[MODULE]) or by installing its package with an entry point in the 'searchgym.plugins' group (docs/plug-in.md)
    """
    import_modules(imports, key=key, directory=directory)
    check_env_id(env_id, import_hint=f"{key} MODULE" if key.startswith("--") else f"{key}: [MODULE]")


def import_modules(
    names: str | Sequence[str] | None, *, key: str = "--import", directory: str | None = None
) -> None:
    """Import the user's modules ``names`` (one name or a list), after the installed plug-ins, so
    that what they register can be named; ``directory`` (by default the current one, as ``python
    -m`` searches it) is searched first. A name that is not a module name, a module that is not
    there, or one that fails while it is imported (an exception, ``sys.exit``) is a `ConfigError`
    naming ``key`` and it.

    >>> import_modules("envs/my_lab.py", key="imports")
    Traceback (most recent call last):
    ...
    searchgym.errors.ConfigError: imports envs/my_lab.py: not a module name; name it as Python imports \
it (my_lab, or my_pkg.envs), from the directory that holds it or with that directory on PYTHONPATH
    """
    load_plugins()
    if names is None or isinstance(names, str):
        names = [] if names is None else [names]
    elif not isinstance(names, (list, tuple)):
        raise ConfigError(f"{key} takes a module name or a list of them, got {names!r}")
    for name in names:
        if not isinstance(name, str) or not all(part.isidentifier() for part in name.split(".")):
            raise ConfigError(
                f"{key} {name}: not a module name; name it as Python imports it (my_lab, or my_pkg.envs), "
                "from the directory that holds it or with that directory on PYTHONPATH"
            )
    directory = directory or os.getcwd()
    if names and directory not in sys.path:
        sys.path.insert(0, directory)
    for name in names:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name not in (name, name.split(".")[0]):  # the module failed to import something
                raise ConfigError(f"{key} {name}: importing it raised {describe_exception(e)}") from e
            hint = f" (to import {name}, write {key} {name[:-3]})" if name.endswith(".py") else ""
            where = "the current directory" if directory == os.getcwd() else directory
            raise ConfigError(f"{key} {name}: no module {e.name!r} in {where} or on PYTHONPATH{hint}") from e
        except KeyboardInterrupt:
            raise
        except BaseException as e:  # a user's module that raises or calls sys.exit while imported
            raise ConfigError(f"{key} {name}: importing it raised {describe_exception(e)}") from e


def _is_gymnasiums(entry_point: Any) -> bool:
    module = entry_point if isinstance(entry_point, str) else getattr(entry_point, "__module__", None) or ""
    return module.split(".")[0] == "gymnasium"


def _register_builtin() -> None:
    scripted = "searchgym.agents.scripted"
    AGENTS.register("oracle", f"{scripted}.baselines:OracleAgent")
    # Verifying in most episodes, not half: warm-started on a coin flip, the greedy policy did not
    # verify (2.00 searches on 2-hop questions), so a cost had no waste to train away.
    AGENTS.register("wasteful-oracle", f"{scripted}.baselines:OracleAgent", kwargs={"p_verify": 0.8})
    # Calls without the <think> boilerplate: a third of the tokens to decode (issue 44)
    AGENTS.register("terse-oracle", f"{scripted}.baselines:OracleAgent", kwargs={"think": False})
    # Half its episodes take one wrong search and recover (Behavior Priming's error recovery)
    AGENTS.register("recovering-oracle", f"{scripted}.recovery:RecoveringOracleAgent")
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
    retrievers = "searchgym.retrievers"
    RETRIEVERS.register("bm25", f"{retrievers}.bm25:BM25")
    # dense: exact search; lucene: pyserini's BM25 parameters. Written out rather than left to the
    # classes' defaults, so that the envs' on-disk caches of these indexes are keyed by them.
    RETRIEVERS.register("dense", f"{retrievers}.dense:Dense", kwargs={"index": "flat"})
    RETRIEVERS.register("hybrid", f"{retrievers}.hybrid:Hybrid")
    RETRIEVERS.register("lucene", f"{retrievers}.lucene:Lucene", kwargs={"k1": 0.9, "b": 0.4})
    RETRIEVERS.register("rerank", f"{retrievers}.rerank:Rerank")
    PROTOCOLS.register("tags", "searchgym.envs.protocols:TagsProtocol")
    PROTOCOLS.register("tool_calls", "searchgym.envs.protocols:ToolCallsProtocol")
    tasks = "searchgym.tasks"
    TASK_SETS.register("fictional", f"{tasks}:load_fictional")
    for hops in range(1, 5):  # the generated world's default max_hops
        TASK_SETS.register(f"fictional-{hops}hop", f"{tasks}:load_fictional", kwargs={"hops": hops})
    TASK_SETS.register("miniwiki", f"{tasks}.miniwiki:load_miniwiki")
    TASK_SETS.register("fanoutqa", f"{tasks}.fanoutqa:load_fanoutqa")
    # searchgym.tasks.datasets.BENCHMARKS, named here so that listing them imports nothing
    for name in ("nq", "triviaqa", "popqa", "hotpotqa", "2wikimultihopqa", "musique", "bamboogle"):
        TASK_SETS.register(name, f"{tasks}.datasets:load_benchmark", kwargs={"name": name})
    REWARDS.register("evidence_recall", "searchgym.envs.rubric:evidence_recall")
    REWARDS.register("step_gain", "searchgym.envs.rubric:step_gain")
    REWARDS.register("citation", "searchgym.envs.rubric:citation")
    REWARDS.register("judge", "searchgym.envs.rubric:judge")
    TRAINER_REWARDS.register("info_gain", "searchgym.agents.train.rewards:info_gain")


_register_builtin()
