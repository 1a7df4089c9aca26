"""The env ids per retrieval backend, on a small generated world and a small mini-wiki corpus,
with the tiny random models of tests/conftest.py and a cache directory under tmp_path."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import shutil
import sys
import warnings
from dataclasses import replace
from pathlib import Path

import pytest
from doc_blocks import DOCS, doc_block
from gymnasium.utils.env_checker import check_env

import searchgym
from searchgym.agents import OracleAgent, run_episodes, summarize
from searchgym.cli import main
from searchgym.envs import SearchEnv, backends
from searchgym.envs.planner_env import PlannerEnv
from searchgym.envs.registry import RETRIEVAL_BACKENDS
from searchgym.envs.tools import ToolCall
from searchgym.errors import ConfigError, DataNotFoundError, RetrieverError
from searchgym.generation import Completion
from searchgym.registry import RETRIEVERS
from searchgym.retrievers import BM25, Dense, Doc, Encoder, Hybrid, read_corpus, write_corpus
from searchgym.retrievers.base import clean_text
from searchgym.retrievers.index import load_index, read_meta, staged, write_meta
from searchgym.tasks import Task
from searchgym.tasks.miniwiki import miniwiki_path

SMALL_WORLD = {"n_passages": 300}
FAMILIES = ("FictionalQA", "MiniWiki")
CLASSES = {"bm25": "BM25", "dense": "Dense", "hybrid": "Hybrid", "lucene": "Lucene", "rerank": "Rerank"}


def lucene_missing() -> str | None:
    if importlib.util.find_spec("pyserini") is None:
        return 'pyserini is not installed (pip install "searchgym[lucene]")'
    if shutil.which("java") is None:
        return "pyserini needs a Java runtime and none is on PATH"
    if shutil.which("javac") is None and not os.environ.get("JAVA_HOME"):
        return "pyjnius needs a Java JDK (javac on PATH or JAVA_HOME) and finds none"
    return None


def rerank_missing() -> str | None:
    if importlib.util.find_spec("searchgym.retrievers.rerank") is None:
        return "retrievers/rerank.py is not there yet"
    return None


def miniwiki_paragraphs(n: int = 40) -> list[dict[str, str]]:
    """``n`` paragraphs about made-up abbeys, each giving one question."""
    rows = []
    for i in range(n):
        name = f"Quellmoor{chr(97 + i % 26)}{chr(97 + i // 26)} Abbey"
        text = (
            f"{name} is a ruined monastery beside the river number {i} in the northern hills. "
            f"Pilgrims visiting {name} admire {i} painted ceilings, carved doors and a walled garden."
        )
        rows.append({"id": f"miniwiki-{i:05d}", "title": name, "text": text})
    return rows


@pytest.fixture
def data_dir(tmp_path, monkeypatch) -> Path:
    """``$SEARCHGYM_DATA`` with a small mini-wiki corpus in it."""
    path = miniwiki_path(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in miniwiki_paragraphs()), encoding="utf-8")
    monkeypatch.setenv("SEARCHGYM_DATA", str(tmp_path))
    return tmp_path


@pytest.fixture(autouse=True)
def fresh_memo(tmp_path, monkeypatch):
    """Each test builds its retrievers itself, and never in the user's cache directory."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    backends.clear_memo()
    yield
    backends.clear_memo()


def env_kwargs(request, family: str, backend: str, cache_dir: Path) -> dict:
    """Small world, tiny models, a private cache; skips a backend whose code or runtime is missing."""
    kwargs: dict = {
        "cache_dir": cache_dir,
        **(SMALL_WORLD if family == "FictionalQA" else {"split": "train"}),
    }
    if backend in ("dense", "hybrid"):
        kwargs["encoder"] = request.getfixturevalue("tiny_encoder_dir")
    if backend == "lucene" and (reason := lucene_missing()):
        pytest.skip(reason)
    if backend == "rerank":
        if reason := rerank_missing():
            pytest.skip(reason)
        kwargs["reranker"] = request.getfixturevalue("tiny_cross_encoder_dir")
    return kwargs


def test_every_backend_is_registered_for_both_corpora():
    """Each built-in retriever kind has its ids, and the kind `searchgym index build` knows by
    that name is the env's backend: one registry."""
    ids = set(searchgym.list_ids())
    for family in FAMILIES:
        assert {f"searchgym/{family}-{name}-v0" for name, _ in RETRIEVAL_BACKENDS} <= ids
    assert [backend for _, backend in RETRIEVAL_BACKENDS] == searchgym.list_retrievers()[:5]


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize(("name", "backend"), RETRIEVAL_BACKENDS)
def test_each_id_passes_the_env_checker_and_finds_the_evidence(
    request, data_dir, tmp_path, family, name, backend
):
    env_id = f"searchgym/{family}-{name}-v0"
    env = searchgym.make(env_id, **env_kwargs(request, family, backend, tmp_path / "cache"))
    assert type(env.unwrapped.retriever).__name__ == CLASSES[backend]
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*different from the unwrapped.*")
        check_env(env.unwrapped)

    task = env.unwrapped.tasks[0]
    obs, info = env.reset(seed=0, options={"task": task})
    agent = OracleAgent()
    agent.reset(info)
    obs, _, terminated, _, info = env.step(agent.act(obs))
    assert not terminated and info["tool"] == "search" and len(info["doc_ids"]) == 3
    if backend in ("bm25", "lucene"):  # the tiny models of the other backends are random
        assert task.evidence[0] in info["doc_ids"]
    env.close()


def test_oracle_finds_every_miniwiki_source_with_bm25(data_dir):
    env_fn = lambda: searchgym.make("searchgym/MiniWiki-BM25-v0", split="train")  # noqa: E731
    tasks = env_fn().unwrapped.tasks
    episodes = run_episodes(env_fn, OracleAgent, tasks)
    metrics = summarize(episodes)
    assert metrics["n"] == len(tasks) >= 25
    assert metrics["em"] == 1.0 and metrics["evidence_recall"] == 1.0


def count_passage_encodings(monkeypatch) -> list[int]:
    calls: list[int] = []
    original = Encoder.encode_passages

    def counting(self, passages, **kwargs):
        calls.append(len(passages))
        return original(self, passages, **kwargs)

    monkeypatch.setattr(Encoder, "encode_passages", counting)
    return calls


def test_dense_index_is_built_once_and_reopened_from_the_cache(tiny_encoder_dir, tmp_path, monkeypatch):
    calls = count_passage_encodings(monkeypatch)
    cache = tmp_path / "cache"
    kwargs = {"encoder": tiny_encoder_dir, "cache_dir": cache, **SMALL_WORLD}
    env = searchgym.make("searchgym/FictionalQA-Dense-v0", **kwargs)
    assert sum(calls) == len(env.unwrapped.retriever) > 250  # every passage encoded once
    (folder,) = cache.iterdir()  # one complete folder, no temporary one left behind
    assert folder.name.startswith("fictional-s0-n300-dense-")
    query = env.unwrapped.tasks[0].question
    before = [(d.id, round(d.score, 5)) for d in env.unwrapped.retriever.search(query, k=5)]
    built_at = (folder / "index.faiss").stat().st_mtime_ns

    assert (
        searchgym.make("searchgym/FictionalQA-Dense-v0", **kwargs).unwrapped.retriever
        is env.unwrapped.retriever
    )
    backends.clear_memo()  # as in a new process
    calls.clear()
    again = searchgym.make("searchgym/FictionalQA-Dense-v0", **kwargs).unwrapped.retriever
    hybrid = searchgym.make("searchgym/FictionalQA-Hybrid-v0", **kwargs).unwrapped.retriever
    assert calls == []  # nothing encoded: the index came from the cache
    assert isinstance(again, Dense) and again is not env.unwrapped.retriever
    assert (
        isinstance(hybrid, Hybrid)
        and hybrid.retrievers[1] is again
        and isinstance(hybrid.retrievers[0], BM25)
    )
    assert [(d.id, round(d.score, 5)) for d in again.search(query, k=5)] == before
    assert (folder / "index.faiss").stat().st_mtime_ns == built_at
    assert list(cache.iterdir()) == [folder]


def test_lucene_index_is_cached_too(tmp_path):
    if reason := lucene_missing():
        pytest.skip(reason)
    kwargs = {"cache_dir": tmp_path / "cache", **SMALL_WORLD}
    env = searchgym.make("searchgym/FictionalQA-Lucene-v0", **kwargs)
    first, query = env.unwrapped.retriever, env.unwrapped.tasks[0].question
    (folder,) = (tmp_path / "cache").iterdir()
    assert folder.name.startswith("fictional-s0-n300-lucene-")
    stamp = {p: p.stat().st_mtime_ns for p in folder.rglob("*")}
    backends.clear_memo()
    again = searchgym.make("searchgym/FictionalQA-Lucene-v0", **kwargs).unwrapped.retriever
    assert again is not first and len(again) == len(first)
    assert {p: p.stat().st_mtime_ns for p in folder.rglob("*")} == stamp  # opened, not rebuilt
    assert again.search(query, k=3) == first.search(query, k=3) != []


def test_cache_key_covers_the_corpus_and_the_encoder(tiny_encoder_dir, tmp_path):
    cache = tmp_path / "cache"
    other_encoder = shutil.copytree(tiny_encoder_dir, tmp_path / "other-encoder")
    for encoder, n_passages in [(tiny_encoder_dir, 300), (tiny_encoder_dir, 320), (other_encoder, 300)]:
        searchgym.make(
            "searchgym/FictionalQA-Dense-v0", encoder=encoder, cache_dir=cache, n_passages=n_passages
        )
    names = sorted(p.name for p in cache.iterdir())
    assert len(names) == 3
    assert [n.rsplit("-", 1)[0] for n in names] == [
        "fictional-s0-n300-dense",
        "fictional-s0-n300-dense",
        "fictional-s0-n320-dense",
    ]


def test_failed_build_leaves_nothing_in_the_cache(tiny_encoder_dir, tmp_path, monkeypatch):
    def broken(self, passages, **kwargs):
        raise KeyboardInterrupt  # as if the user stopped a long build

    monkeypatch.setattr(Encoder, "encode_passages", broken)
    with pytest.raises(KeyboardInterrupt):
        searchgym.make(
            "searchgym/FictionalQA-Dense-v0", encoder=tiny_encoder_dir, cache_dir=tmp_path, **SMALL_WORLD
        )
    assert list(tmp_path.iterdir()) == []


def test_damaged_cache_says_how_to_rebuild(tiny_encoder_dir, tmp_path):
    kwargs = {"encoder": tiny_encoder_dir, "cache_dir": tmp_path, **SMALL_WORLD}
    searchgym.make("searchgym/FictionalQA-Dense-v0", **kwargs)
    (folder,) = tmp_path.iterdir()
    (folder / "searchgym.json").unlink()
    backends.clear_memo()
    with pytest.raises(DataNotFoundError, match="delete that folder and make the env again to rebuild it"):
        searchgym.make("searchgym/FictionalQA-Dense-v0", **kwargs)


def test_default_cache_dir_follows_xdg(tiny_encoder_dir, tmp_path):
    assert backends.default_cache_dir() == tmp_path / "xdg-cache" / "searchgym" / "indexes"
    searchgym.make("searchgym/FictionalQA-Dense-v0", encoder=tiny_encoder_dir, **SMALL_WORLD)
    assert len(list(backends.default_cache_dir().iterdir())) == 1


@pytest.mark.parametrize(
    ("env_id", "kwargs", "message"),
    [
        (
            "FictionalQA-BM25-v0",
            {"encoder": "x"},
            "encoder= applies to the dense and hybrid backends, not 'bm25'",
        ),
        ("FictionalQA-Dense-v0", {"reranker": "x"}, "reranker= applies to the rerank backend, not 'dense'"),
        (
            "FictionalQA-BM25-v0",
            {"backend": "hybird"},
            r"unknown retriever kind 'hybird'. Did you mean 'hybrid'\? Known: bm25, dense, hybrid, lucene, "
            r"rerank \(searchgym.list_retrievers\(\)\)",
        ),
        ("FictionalQA-Hybrid-v0", {"reranker": "x"}, "reranker= applies to the rerank backend, not 'hybrid'"),
        ("FictionalQA-Dense-v0", {"top_kk": 2}, r"unknown env option\(s\) \['top_kk'\]"),
    ],
)
def test_options_that_do_not_apply_are_config_errors(env_id, kwargs, message):
    with pytest.raises(ConfigError, match=message):
        searchgym.make(f"searchgym/{env_id}", **SMALL_WORLD, **kwargs)


class WordOverlap:
    """A user's index kind: the documents sharing at least ``min_shared`` words with the query,
    most shared first; saved as its documents, with its kind and ``min_shared`` in the manifest."""

    def __init__(self, docs, min_shared: int) -> None:
        self.docs, self.min_shared = list(docs), min_shared

    @classmethod
    def build(cls, docs, *, min_shared: int = 1) -> WordOverlap:
        return cls(docs, min_shared)

    def __len__(self) -> int:
        return len(self.docs)

    def search(self, query: str, k: int = 3) -> list[Doc]:
        words = set(re.findall(r"\w+", query.lower()))
        shared = [len(words & set(re.findall(r"\w+", f"{d.title} {d.text}".lower()))) for d in self.docs]
        ranked = sorted((-n, i) for i, n in enumerate(shared) if n >= self.min_shared)
        return [replace(self.docs[i], score=float(-n)) for n, i in ranked[:k]]

    def batch_search(self, queries, k: int = 3) -> list[list[Doc]]:
        return [self.search(q, k) for q in queries]

    def doc(self, doc_id: str) -> Doc | None:
        return next((d for d in self.docs if d.id == doc_id), None)

    def close(self) -> None:
        pass

    def save(self, directory) -> None:
        with staged(directory) as tmp:
            write_corpus(self.docs, tmp / "docs.jsonl")
            write_meta(tmp, {"kind": "test-overlap", "min_shared": self.min_shared})

    @classmethod
    def load(cls, directory) -> WordOverlap:
        meta = read_meta(directory, "test-overlap")
        return cls(read_corpus(Path(directory) / "docs.jsonl"), meta["min_shared"])


@pytest.fixture
def overlap_kind():
    """``test-overlap``, registered as a user registers a kind, with an option; unregistered after."""
    searchgym.register_retriever("test-overlap", WordOverlap, min_shared=2)
    yield
    del RETRIEVERS._specs["test-overlap"]


def test_a_users_retriever_kind_is_an_env_backend_and_an_index_kind(
    overlap_kind, tiny_corpus_path, tmp_path, capsys
):
    """One registration makes a kind an env's backend, built with the options it was registered
    with and memoised like a built-in one, and `searchgym index build --kind`'s, whose index opens
    (as `searchgym serve` opens it) as that kind."""
    env = searchgym.make("searchgym/FictionalQA-BM25-v0", backend="test-overlap", **SMALL_WORLD)
    retriever = env.unwrapped.retriever
    assert isinstance(retriever, WordOverlap) and retriever.min_shared == 2
    made_again = searchgym.make("searchgym/FictionalQA-BM25-v0", backend="test-overlap", **SMALL_WORLD)
    assert made_again.unwrapped.retriever is retriever
    question = env.unwrapped.tasks[0].question
    env.reset(seed=0)
    _, _, _, _, info = env.step(f"<search>{question}</search>")
    expected = WordOverlap.build(backends.world_corpus(0, 300).docs, min_shared=2).search(question, 3)
    assert info["doc_ids"] == [d.id for d in expected] != []

    argv = ["index", "build", "--corpus", str(tiny_corpus_path), "--kind", "test-overlap"]
    assert main(argv + ["--out", str(tmp_path / "idx")]) == 0
    assert "test-overlap index of 8 documents" in capsys.readouterr().out
    index = load_index(tmp_path / "idx")
    assert isinstance(index, WordOverlap) and index.min_shared == 2
    assert [d.id for d in index.search("capital France", 3)] == ["d1"]  # the others share one word


def test_the_plug_in_pages_retriever_kind_runs_as_written(tmp_path, monkeypatch, capsys, tiny_corpus_path):
    """docs/plug-in.md's block registers a kind that an env searches with; saved as ``mylab.py``,
    the page's ``searchgym index build --import mylab`` builds an index of that kind."""
    block = doc_block("plug-in.md", "python", 2)
    (tmp_path / "mylab.py").write_text(block)
    shutil.copy(tiny_corpus_path, tmp_path / "corpus.jsonl")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    page = " ".join((DOCS / "plug-in.md").read_text().split())
    command = shlex.split(re.search(r"`(searchgym index build --import mylab [^`]+)`", page).group(1))
    try:
        exec(compile(block, "docs/plug-in.md", "exec"), {})
        shown = [line.split("# ")[-1] for line in block.splitlines() if line.startswith("print(")]
        assert capsys.readouterr().out.splitlines() == shown  # what its comments show
        del RETRIEVERS._specs["bm25-okapi"]  # mylab registers it again
        assert main(command[1:]) == 0
    finally:
        RETRIEVERS._specs.pop("bm25-okapi", None)
        sys.modules.pop("mylab", None)
    index = load_index(tmp_path / "idx" / "okapi")
    assert isinstance(index, BM25) and (index.params["k1"], index.params["b"]) == (1.2, 0.75)


def test_miniwiki_without_its_corpus_names_the_fetch_script(tmp_path, monkeypatch):
    monkeypatch.setenv("SEARCHGYM_DATA", str(tmp_path))
    with pytest.raises(DataNotFoundError, match=r"python data_scripts/fetch_miniwiki.py --out "):
        searchgym.make("searchgym/MiniWiki-BM25-v0")


# -- text that no backend takes ------------------------------------------------------------------
# A lone surrogate (what JSON "\ud800" from an OpenAI-compatible server decodes to) made the
# tokenizers of Dense, Hybrid, Rerank and Simulated raise TypeError and pyjnius UnicodeEncodeError,
# out of env.step and after the turn and the search were counted.
UNTAKEABLE = {"lone-surrogate": "capital\ud800 of \udc80Orvanta", "nul": "capital\x00 of Orvanta"}
MODEL_BACKENDS = ("Dense", "Hybrid", "Rerank", "Lucene", "Simulated")


@pytest.fixture(scope="module")
def tiny_simulator(tiny_llama_dir):
    """The tiny random Llama of tests/conftest.py behind `HFPolicy`: a simulated search engine
    whose tokenizer is real."""
    from searchgym.agents.policies.hf import HFPolicy

    return HFPolicy(str(tiny_llama_dir), device="cpu")


def fictional_env(request, name: str, tmp_path: Path, **kwargs):
    """``searchgym/FictionalQA-{name}-v0`` with the tiny models (Simulated: the tiny Llama, eight
    new tokens a search)."""
    if name == "Simulated":
        generator = request.getfixturevalue("tiny_simulator")
        made = {**SMALL_WORLD, "generator": generator, "simulator_params": {"max_new_tokens": 8}}
    else:
        made = env_kwargs(request, "FictionalQA", name.lower(), tmp_path / "cache")
    return searchgym.make(f"searchgym/FictionalQA-{name}-v0", **made, **kwargs)


def counts(info: dict) -> tuple[int, int, int, int]:
    return info["turn"], info["n_searches"], info["n_invalid"], info["n_errors"]


@pytest.mark.parametrize("text", UNTAKEABLE.values(), ids=list(UNTAKEABLE))
@pytest.mark.parametrize("name", MODEL_BACKENDS)
def test_text_no_backend_takes_is_searched_as_clean_text(request, tmp_path, name, text):
    """In either protocol (tool_calls: JSON-escaped, as a server sends it) the query reaches the
    backend with U+FFFD in place: a search like any other, counted once, its observation UTF-8."""
    as_json = json.dumps({"name": "search", "arguments": {"query": text}})  # "\\ud800", "\\u0000"
    for protocol, action in [
        ("tags", f"<search>{text}</search>"),
        ("tool_calls", f"<tool_call>{as_json}</tool_call>"),
    ]:
        env = fictional_env(request, name, tmp_path, protocol=protocol)
        env.reset(seed=0)
        obs, _, terminated, truncated, info = env.step(action)
        assert not (terminated or truncated) and info["error"] is None
        assert info["query"] == clean_text(text) != text
        assert counts(info) == (1, 1, 0, 0)
        obs.encode("utf-8")  # the agent's tokenizer reads it next
        env.close()


@pytest.mark.parametrize("name", MODEL_BACKENDS)
def test_a_megabyte_query_is_an_invalid_turn_and_the_longest_one_a_search(request, tmp_path, name):
    """The action limit (20,000 characters) refuses a 1 MB query as an invalid turn, not a search;
    the longest query it lets through, lone surrogates and all, is searched by every backend."""
    env = fictional_env(request, name, tmp_path)
    env.reset(seed=0)
    obs, _, terminated, _, info = env.step("<search>" + "Orvanta " * (1 << 17) + "</search>")
    assert not terminated and "the limit is 20000" in obs
    assert counts(info) == (1, 0, 1, 0)
    room = env.unwrapped.protocol.max_chars - len("<search></search>")
    longest = ("capital founder\ud800 Orvanta\x00 " * 1000)[:room]
    obs, _, terminated, _, info = env.step(f"<search>{longest}</search>")
    assert not terminated and info["error"] is None
    assert counts(info) == (2, 1, 1, 0)
    obs.encode("utf-8")
    env.close()


class StrictRetriever:
    """A user's retriever over a backend that takes UTF-8 without NULs (a C library, a database,
    an HTTP service), as most do: a lone surrogate or a NUL raises there. ``failure`` is raised
    by every search instead."""

    def __init__(self, failure: BaseException | None = None) -> None:
        self.queries: list[str] = []
        self.failure = failure

    def search(self, query: str, k: int = 3) -> list[Doc]:
        if self.failure is not None:
            raise self.failure
        if "\x00" in query:
            raise ValueError("embedded null character")
        query.encode("utf-8")  # UnicodeEncodeError on a lone surrogate
        self.queries.append(query)
        return [Doc("d1", "Paris", "Paris is the capital of France \ud800.")][:k]

    def batch_search(self, queries, k: int = 3) -> list[list[Doc]]:
        return [self.search(q, k) for q in queries]

    def doc(self, doc_id: str) -> Doc | None:
        return None

    def close(self) -> None:
        pass


def user_env(retriever: StrictRetriever, protocol: str = "tags") -> SearchEnv:
    return SearchEnv([Task("q", "What is the capital of France?", ("Paris",))], retriever, protocol=protocol)


def test_a_users_retriever_gets_clean_text_and_the_agent_a_clean_observation():
    """The boundary is the env's, so a retriever built by a user is protected too; a document
    with a lone surrogate is shown with U+FFFD, which the agent's tokenizer takes."""
    retriever = StrictRetriever()
    env = user_env(retriever)
    env.reset(seed=0)
    obs, _, _, _, info = env.step("<search>capital\ud800 of\x00France</search>")
    assert retriever.queries == ["capital\ufffd of\ufffdFrance"] and counts(info) == (1, 1, 0, 0)
    assert "France \ufffd." in obs


def test_a_failure_of_the_world_is_a_search_and_an_error_a_bug_is_no_step():
    """A `RetrieverError` took its turn: an observation, one search, one error, its cost. An
    exception that is a bug propagates, and the step that raised did not happen: the turn and
    the counters are as before it, and the episode goes on."""
    env = user_env(StrictRetriever(RetrieverError("index offline")))
    env.reset(seed=0)
    obs, reward, _, _, info = env.step("<search>capital</search>")
    assert "Search failed (RetrieverError: index offline)" in obs and counts(info) == (1, 1, 0, 1)
    env.unwrapped.retriever.failure = KeyError("a bug in the retriever")
    with pytest.raises(KeyError, match="a bug in the retriever"):
        env.step("<search>capital</search>")
    _, _, terminated, _, info = env.step("<answer>Paris</answer>")
    assert terminated and info["em"] == 1.0 and counts(info) == (2, 1, 0, 1)


@pytest.mark.parametrize("protocol", ["tags", "tool_calls"])
def test_an_answer_with_a_lone_surrogate_is_scored(protocol):
    env = user_env(StrictRetriever(), protocol)
    env.reset(seed=0)
    answer = ToolCall("answer", {"answer": "Paris \ud800"})
    _, _, terminated, _, info = env.step(env.protocol.format_call(answer))
    assert terminated and info["prediction"] == "Paris \ufffd" and info["em"] == 0 < info["f1"]


class StrictGenerator:
    """A planner's answering model whose tokenizer takes UTF-8 only, behind a server whose JSON
    reply holds a lone surrogate (``"\\ud800"``)."""

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def chat(self, conversations, params) -> list[Completion]:
        for conversation in conversations:
            conversation[-1]["content"].encode("utf-8")  # UnicodeEncodeError on a lone surrogate
            self.prompts.append(conversation[-1]["content"])
        return [Completion(text="<answer>Paris \ud800</answer>") for _ in conversations]


def test_the_planners_generator_reads_clean_text_and_its_reply_is_cleaned():
    """The generator's prompt holds the documents the planner found (one with a lone surrogate)
    and its reply is scored: both reach the generator and the scorer as clean text."""
    generator = StrictGenerator()
    env = PlannerEnv([Task("q", "What is the capital of France?", ("Paris",))], StrictRetriever(), generator)
    env.reset(seed=0)
    env.step("<search>capital\ud800</search>")
    _, _, terminated, _, info = env.step("<finish></finish>")
    assert terminated and info["prediction"] == "Paris \ufffd" and info["generator_reply"].isprintable()
    assert "France \ufffd." in generator.prompts[0] and info["n_errors"] == 0
