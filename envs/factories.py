"""Entry points of the registered environments (imported lazily by the registry)."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym

from searchgym.config_types import known_fields
from searchgym.envs.backends import file_corpus, make_retriever, world_corpus
from searchgym.envs.rewards import RewardWeights
from searchgym.envs.search_env import SearchEnv
from searchgym.envs.self_search import SelfSearchEnv
from searchgym.envs.simulated import SimulatedSearchEnv
from searchgym.envs.wrappers import TurnLimit
from searchgym.errors import ConfigError
from searchgym.generation import SamplingParams, TextGenerator
from searchgym.retrievers import BM25, Retriever
from searchgym.retrievers.index import read_meta
from searchgym.retrievers.simulated import DEFAULT_PARAMS as SIMULATOR_PARAMS
from searchgym.retrievers.simulated import NoiseCurriculum, Simulated
from searchgym.tasks import load as load_task_set
from searchgym.tasks.datasets import benchmark_info, default_data_dir, load_benchmark
from searchgym.tasks.fanoutqa import load_fanoutqa
from searchgym.tasks.miniwiki import load_miniwiki, miniwiki_path
from searchgym.tasks.task import Task
from searchgym.tasks.world import load_world


def reward_weights(rewards: RewardWeights | dict[str, Any] | None) -> RewardWeights:
    """Accept weights as the dataclass or as a plain mapping (from YAML or the CLI)."""
    return RewardWeights.parse(rewards)


def search_env(
    tasks: Sequence[Task],
    retriever: Retriever,
    *,
    max_turns: int = 8,
    rewards: RewardWeights | dict[str, Any] | None = None,
    **options: Any,
) -> gym.Env:
    """A `SearchEnv` under a `TurnLimit`. ``options`` are SearchEnv's: ``protocol`` ("tags" or
    "tool_calls"), ``top_k`` (3) and ``max_obs_tokens`` (512; tokens as
    `searchgym.envs.observations.count_tokens` counts them, so at most 6 characters each)."""
    check_options(options)
    env = SearchEnv(tasks, retriever, rewards=reward_weights(rewards), **options)
    return TurnLimit(env, max_turns)


def qa_env(
    tasks: Sequence[Any] | Mapping[str, Sequence[Any]],
    retriever: Retriever,
    *,
    split: str | None = None,
    max_turns: int = 8,
    rewards: RewardWeights | dict[str, Any] | None = None,
    **options: Any,
) -> gym.Env:
    """A `SearchEnv` over a user's ``tasks`` and ``retriever`` (what ``searchgym.register(id,
    tasks=..., retriever=...)`` builds). ``tasks`` are `Task`, ``{"question", "answers", ...}`` or
    ``(question, answers)`` items, or a mapping of such lists by split (``split`` picks one;
    default ``dev`` or the first; a plain list serves every split). ``options`` go to `search_env`."""
    if isinstance(tasks, Mapping):
        if split is None:
            split = "dev" if "dev" in tasks else next(iter(tasks), "")
        if split not in tasks:
            raise ConfigError(f"no split {split!r} among this env's tasks; its splits are {sorted(tasks)}")
        tasks = tasks[split]
    return search_env(as_tasks(tasks), retriever, max_turns=max_turns, rewards=rewards, **options)


def as_tasks(items: Sequence[Any]) -> list[Task]:
    """`Task` objects from tasks, ``{"question", "answers", "id"?, "evidence"?, "metadata"?}``
    mappings or ``(question, answers)`` pairs; ``answers`` may be one string.

    >>> as_tasks([("Capital of France?", "Paris")])[0].answers
    ('Paris',)
    """
    out = []
    for i, item in enumerate(items):
        if isinstance(item, Task):
            out.append(item)
            continue
        if isinstance(item, Mapping) and {"question", "answers"} <= set(item):
            row = dict(item)
        elif isinstance(item, (tuple, list)) and len(item) == 2:
            row = {"question": item[0], "answers": item[1]}
        else:
            raise ConfigError(
                f"task {i} is {item!r}: give a Task, a dict with 'question' and 'answers', or a "
                "(question, answers) pair"
            )
        answers = row["answers"]
        row["answers"] = [answers] if isinstance(answers, str) else list(answers)
        out.append(Task.from_dict({"id": f"task-{i}", **row}))
    if not out:
        raise ConfigError("an env needs at least one task")
    return out


def env_tasks(
    task_set: str | None, split: str, own: Callable[[], Sequence[Task]], hops: int | list[int] | None = None
) -> Sequence[Task]:
    """An env's tasks: its own (``own()``), or, with ``task_set``, the ``split`` tasks of that
    task set in their place (a name ``searchgym list task-sets`` prints, ``module:attr``, or a
    questions JSONL, `searchgym.tasks.questions`); the env's corpus stays its own."""
    if task_set is None:
        return own()
    if hops is not None:
        raise ConfigError(
            f"hops picks among the generated world's questions and does not apply to task_set {task_set!r}; "
            "leave hops out (or keep only the questions you want in the task set)"
        )
    if not isinstance(task_set, (str, os.PathLike)):
        raise ConfigError(f"task_set is a task set name or a questions .jsonl file, got {task_set!r}")
    return load_task_set(task_set, split=split)


def world_tasks(
    task_set: str | None, split: str, hops: int | list[int] | None, seed: int, n_passages: int
) -> Sequence[Task]:
    """The ``split`` questions (of ``hops``) of the generated world ``(seed, n_passages)``, or
    ``task_set``'s in their place (`env_tasks`)."""
    return env_tasks(
        task_set, split, lambda: load_world(seed=seed, n_passages=n_passages).tasks(split, hops=hops), hops
    )


def check_options(options: dict[str, Any]) -> None:
    """Raise `ConfigError` for an option `search_env` does not take or for bad reward weights;
    factories call it first, so a typo fails before any index is built."""
    known = (set(inspect.signature(SearchEnv).parameters) - {"tasks", "retriever"}) | {"max_turns"}
    unknown = sorted(set(options) - known)
    if unknown:
        raise ConfigError(f"unknown env option(s) {unknown}; the options are {sorted(known)}")
    reward_weights(options.get("rewards"))


def fictional_qa(
    *,
    backend: str = "bm25",
    seed: int = 0,
    n_passages: int = 2000,
    split: str = "dev",
    hops: int | list[int] | None = None,
    encoder: str | Path | None = None,
    reranker: str | Path | None = None,
    cache_dir: str | Path | None = None,
    show_progress: bool | None = None,
    task_set: str | None = None,
    **options: Any,
) -> gym.Env:
    """Questions about the generated world, searched over its corpus with ``backend`` (see
    `searchgym.envs.backends.make_retriever` for ``encoder``, ``reranker``, ``cache_dir`` and
    ``show_progress``); ``task_set`` poses other questions (`env_tasks`); ``options`` go to
    `search_env`."""
    check_options(options)
    tasks = world_tasks(task_set, split, hops, seed, n_passages)
    retriever = make_retriever(
        backend,
        world_corpus(seed, n_passages),
        encoder=encoder,
        reranker=reranker,
        cache_dir=cache_dir,
        show_progress=show_progress,
    )
    return search_env(tasks, retriever, **options)


def fictional_self_search(
    *,
    seed: int = 0,
    n_passages: int = 2000,
    split: str = "dev",
    hops: int | list[int] | None = None,
    max_turns: int = 8,
    rewards: RewardWeights | dict[str, Any] | None = None,
    task_set: str | None = None,
) -> gym.Env:
    """Questions about the generated world answered with self-search (SSRL, `SelfSearchEnv`):
    the same tasks as ``FictionalQA-BM25-v0``, which is the sim-to-real check (``task_set``: other
    questions, `env_tasks`)."""
    tasks = world_tasks(task_set, split, hops, seed, n_passages)
    weights = reward_weights(rewards) if rewards is not None else None
    return TurnLimit(SelfSearchEnv(tasks, rewards=weights), max_turns)


def fictional_simulated(
    *,
    generator: TextGenerator | None = None,
    seed: int = 0,
    n_passages: int = 2000,
    split: str = "dev",
    hops: int | list[int] | None = None,
    noise: float | NoiseCurriculum | dict[str, Any] = 0.0,
    k_docs: int = 5,
    simulator_params: SamplingParams | dict[str, Any] | None = None,
    cache: str | Path | None = None,
    namespace: str = "",
    max_turns: int = 8,
    rewards: RewardWeights | dict[str, Any] | None = None,
    task_set: str | None = None,
    **options: Any,
) -> gym.Env:
    """Questions about the generated world (or ``task_set``'s, `env_tasks`), searched through a
    search engine that ``generator`` (any `TextGenerator`, e.g. a policy) simulates: `Simulated`
    with ``noise`` (a probability, or a `NoiseCurriculum` or a mapping of its fields, read at the
    step a trainer sets with ``retriever.set_step``; 0 until then), ``k_docs``,
    ``simulator_params`` (default greedy, 640 new tokens; a mapping overrides single fields),
    ``cache`` and ``namespace``. ``seed`` also seeds the useful/noisy draws; ``options`` are
    `search_env`'s."""
    check_options(options)
    if generator is None:
        raise ConfigError(
            "this env's search engine is a language model: pass one as "
            "searchgym.make(id, generator=policy) (any object with chat(conversations, params), e.g. "
            "searchgym.agents.policies.hf.HFPolicy('smollm2-135m-instruct')), or on the command line "
            "`searchgym eval --simulator hf:smollm2-135m-instruct`"
        )
    if isinstance(noise, dict):
        noise = NoiseCurriculum(**known_fields(NoiseCurriculum, noise, "noise curriculum field"))
    if isinstance(simulator_params, dict):  # fields not given keep the simulator's defaults
        known = known_fields(SamplingParams, simulator_params, "simulator_params field")
        simulator_params = dataclasses.replace(SIMULATOR_PARAMS, **known)
    tasks = world_tasks(task_set, split, hops, seed, n_passages)
    simulated = Simulated(
        generator,
        params=simulator_params,
        k_docs=k_docs,
        noise=noise,
        seed=seed,
        cache=cache,
        namespace=namespace,
    )
    env = SimulatedSearchEnv(tasks, simulated, rewards=reward_weights(rewards), **options)
    return TurnLimit(env, max_turns)


def mini_wiki(
    *,
    backend: str = "bm25",
    split: str = "dev",
    data_dir: str | Path | None = None,
    encoder: str | Path | None = None,
    reranker: str | Path | None = None,
    cache_dir: str | Path | None = None,
    show_progress: bool | None = None,
    task_set: str | None = None,
    **options: Any,
) -> gym.Env:
    """Which subject a sentence masks, over 10,033 real Wikipedia lead paragraphs (`load_miniwiki`),
    searched over those paragraphs with ``backend`` (as in `fictional_qa`, ``task_set`` too). The
    corpus is read from ``data_dir`` (default ``$SEARCHGYM_DATA``), where
    ``data_scripts/fetch_miniwiki.py`` puts it."""
    check_options(options)
    # first: a missing corpus names its fetch script
    tasks = env_tasks(task_set, split, lambda: load_miniwiki(split, data_dir=data_dir))
    retriever = _miniwiki_retriever(backend, data_dir, encoder, reranker, cache_dir, show_progress)
    return search_env(tasks, retriever, **options)


def fanout_qa(
    *,
    backend: str = "bm25",
    split: str = "dev",
    data_dir: str | Path | None = None,
    encoder: str | Path | None = None,
    reranker: str | Path | None = None,
    cache_dir: str | Path | None = None,
    show_progress: bool | None = None,
    task_set: str | None = None,
    **options: Any,
) -> gym.Env:
    """FanOutQA's human-written questions whose evidence is a mini-wiki paragraph
    (`load_fanoutqa`, needs the ``fanoutqa`` extra), searched over the whole mini-wiki corpus as
    in `mini_wiki`."""
    check_options(options)
    # first: a missing corpus names its fetch script
    tasks = env_tasks(task_set, split, lambda: load_fanoutqa(split, data_dir=data_dir))
    retriever = _miniwiki_retriever(backend, data_dir, encoder, reranker, cache_dir, show_progress)
    return search_env(tasks, retriever, **options)


def _miniwiki_retriever(
    backend: str,
    data_dir: str | Path | None,
    encoder: str | Path | None,
    reranker: str | Path | None,
    cache_dir: str | Path | None,
    show_progress: bool | None,
) -> Any:
    """The ``backend`` retriever over the mini-wiki corpus under ``data_dir`` (`mini_wiki`, `fanout_qa`)."""
    corpus = file_corpus(miniwiki_path(data_dir), "miniwiki")
    return make_retriever(
        backend, corpus, encoder=encoder, reranker=reranker, cache_dir=cache_dir, show_progress=show_progress
    )


@functools.lru_cache(maxsize=2)
def _load_bm25(index_dir: str) -> BM25:
    return BM25.load(index_dir, mmap=True)


def benchmark_qa(
    *,
    dataset: str,
    split: str | None = None,
    data_dir: str | Path | None = None,
    index_dir: str | Path | None = None,
    task_set: str | None = None,
    **options: Any,
) -> gym.Env:
    """A real QA benchmark (Search-R1/FlashRAG files) searched with BM25 over a local index;
    ``task_set`` poses other questions over it (`env_tasks`; with ``index_dir``, your questions
    over your own corpus); ``options`` go to `search_env`.

    Files are looked up under ``data_dir`` (default ``$SEARCHGYM_DATA`` or
    ``~/.cache/searchgym/data``): ``qa/{dataset}/{split}.jsonl`` and, unless ``index_dir`` is
    given, the index ``indexes/wiki18-bm25``. ``split`` defaults to the one Search-R1 evaluates on.
    """
    data_dir = Path(data_dir) if data_dir else default_data_dir()
    split = split or benchmark_info(dataset).eval_split
    tasks = env_tasks(task_set, split, lambda: load_benchmark(dataset, split, data_dir=data_dir))
    index_dir = Path(index_dir) if index_dir else data_dir / "indexes" / "wiki18-bm25"
    read_meta(index_dir, "bm25")  # a missing index names the command that builds it
    return search_env(tasks, _load_bm25(str(index_dir)), **options)
