import json
import warnings
from pathlib import Path

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env
from test_backends import FAMILIES, miniwiki_paragraphs
from test_backends import env_kwargs as backend_kwargs
from test_simulated_env import ScriptedSimulator

import searchgym
from searchgym.envs.contract import check_env_contract
from searchgym.envs.registry import BENCHMARK_ENVS
from searchgym.errors import ConfigError, DataNotFoundError
from searchgym.registry import RETRIEVERS
from searchgym.retrievers import BM25
from searchgym.tasks.datasets import BENCHMARKS
from searchgym.tasks.miniwiki import miniwiki_path

SMALL_WORLD = {"n_passages": 300}
FANOUTQA_DATA = Path(__file__).resolve().parents[1] / "fixtures" / "fanoutqa"


@pytest.fixture
def data_dir(tmp_path, monkeypatch, tiny_corpus_path):
    """A data directory with one question per benchmark, a BM25 index of the tiny corpus and a
    small mini-wiki corpus; indexes are cached under tmp_path, never in the user's cache."""
    path = miniwiki_path(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in miniwiki_paragraphs()), encoding="utf-8")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    for _, dataset in BENCHMARK_ENVS:
        path = tmp_path / "qa" / dataset / f"{BENCHMARKS[dataset].eval_split}.jsonl"
        path.parent.mkdir(parents=True)
        row = {"id": "0", "question": "What is the capital of France?", "golden_answers": ["Paris"]}
        path.write_text(json.dumps(row) + "\n")
    BM25.from_corpus(tiny_corpus_path).save(tmp_path / "indexes" / "wiki18-bm25")
    monkeypatch.setenv("SEARCHGYM_DATA", str(tmp_path))
    return tmp_path


def small_kwargs(request, env_id, tmp_path):
    """Small corpora and the tiny random models (see test_backends.py) for env ``env_id``; a
    scripted simulator (test_simulated_env.py) for the simulated search engine."""
    family, _, backend = env_id.split("/")[1].rsplit("-v", 1)[0].partition("-")
    if family in FAMILIES and backend.lower() in RETRIEVERS:
        return backend_kwargs(request, family, backend.lower(), tmp_path / "cache")
    if backend == "Simulated":
        return {**SMALL_WORLD, "generator": ScriptedSimulator()}
    if family == "FanOutQA":  # the mini-wiki paragraphs its questions need (tests/tasks/test_fanoutqa.py)
        pytest.importorskip(
            "fanoutqa", reason='fanoutqa is an optional extra: pip install "searchgym[fanoutqa]"'
        )
        return {"data_dir": FANOUTQA_DATA}
    return SMALL_WORLD if family == "FictionalQA" else {}


def test_every_id_is_listed_once():
    ids = searchgym.list_ids()
    assert "searchgym/FictionalQA-BM25-v0" in ids
    assert {f"searchgym/{name}-BM25-v0" for name, _ in BENCHMARK_ENVS} <= set(ids)
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("env_id", searchgym.list_ids())
def test_env_checker_passes_for_every_registered_id(request, env_id, data_dir, tmp_path):
    env = searchgym.make(env_id, **small_kwargs(request, env_id, tmp_path))
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*different from the unwrapped.*")
        check_env(env.unwrapped)
    env.close()


@pytest.mark.parametrize("env_id", searchgym.list_ids())
def test_every_registered_id_keeps_the_contract_the_rollout_reads(request, env_id, data_dir, tmp_path):
    env = searchgym.make(env_id, **small_kwargs(request, env_id, tmp_path))
    check_env_contract(env)  # tasks, protocol, ResetInfo, StepInfo (and AnswerInfo where it answers)
    env.close()


def test_gymnasium_make_and_searchgym_make_agree():
    a = gym.make("searchgym/FictionalQA-BM25-v0", **SMALL_WORLD)
    b = searchgym.make("searchgym/FictionalQA-BM25-v0", **SMALL_WORLD)
    assert a.spec.id == b.spec.id and type(a.unwrapped) is type(b.unwrapped)
    assert a.reset(seed=3)[0] == b.reset(seed=3)[0]


def test_unknown_id_suggests_the_closest():
    with pytest.raises(ConfigError, match="Did you mean 'searchgym/FictionalQA-BM25-v0'"):
        searchgym.make("searchgym/FictionalQA-BM25-v1")


def test_missing_benchmark_data_names_the_script(tmp_path, monkeypatch):
    monkeypatch.setenv("SEARCHGYM_DATA", str(tmp_path))
    with pytest.raises(DataNotFoundError, match=r"data_scripts/fetch_qa.py --dataset nq --split test"):
        searchgym.make("searchgym/NQ-BM25-v0")
    (tmp_path / "qa" / "nq").mkdir(parents=True)
    (tmp_path / "qa" / "nq" / "test.jsonl").write_text(
        '{"id": 1, "question": "q?", "golden_answers": ["a"]}\n'
    )
    with pytest.raises(DataNotFoundError, match=r"searchgym index build --corpus CORPUS.jsonl --kind bm25"):
        searchgym.make("searchgym/NQ-BM25-v0")


def test_users_register_their_own(tiny_corpus_path):
    from searchgym.envs import SearchEnv
    from searchgym.tasks import Task

    def factory(top_k=3):
        tasks = [Task("q", "What is the capital of France?", ("Paris",))]
        return SearchEnv(tasks, BM25.from_corpus(tiny_corpus_path), top_k=top_k)

    searchgym.register("mylab/Tiny-v0", entry_point=factory, max_episode_steps=4)
    try:
        env = searchgym.make("mylab/Tiny-v0", top_k=1)
        assert env.unwrapped.top_k == 1
        assert "mylab/Tiny-v0" in searchgym.list_ids(None)
        assert "mylab/Tiny-v0" not in searchgym.list_ids()
        with pytest.raises(ConfigError, match="already registered"):
            searchgym.register("mylab/Tiny-v0", entry_point=factory)
    finally:
        del gym.registry["mylab/Tiny-v0"]
    with pytest.raises(ConfigError, match="namespace/Name-v0"):
        searchgym.register("Tiny", entry_point=factory)


def test_env_kwargs_are_validated():
    with pytest.raises(ConfigError, match=r"unknown env option\(s\) \['top_kk'\]; the options are .*'top_k'"):
        searchgym.make("searchgym/FictionalQA-BM25-v0", top_kk=2, **SMALL_WORLD)
    with pytest.raises(ConfigError, match="unknown reward weight"):
        searchgym.make("searchgym/FictionalQA-BM25-v0", rewards={"per_serch": 0.1}, **SMALL_WORLD)
    env = searchgym.make(
        "searchgym/FictionalQA-BM25-v0", rewards={"per_search": 0.1}, protocol="tool_calls", **SMALL_WORLD
    )
    assert env.unwrapped.rewards.per_search == 0.1 and env.unwrapped.protocol.name == "tool_calls"


def broken_factory(**kwargs):
    raise FileNotFoundError("no corpus in ./data")


def test_a_user_factory_that_raises_is_a_config_error_naming_it():
    """One line on the command line (`searchgym --debug` shows the traceback), not a traceback."""
    searchgym.register("test/Broken-v0", entry_point=f"{__name__}:broken_factory")
    try:
        with pytest.raises(
            ConfigError, match="env factory 'broken_factory' raised FileNotFoundError: no corpus"
        ):
            searchgym.make("test/Broken-v0")
    finally:
        del gym.registry["test/Broken-v0"]
