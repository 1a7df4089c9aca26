"""The Lucene backend (pyserini 0.25 / Anserini). Tests that need pyserini and Java skip, saying
which is missing; the errors a user gets without them are tested here too."""

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from searchgym.cli import main
from searchgym.errors import ConfigError, DataNotFoundError, DependencyNotInstalled
from searchgym.retrievers import BM25, Doc, Retriever, read_corpus
from searchgym.retrievers import lucene as lucene_module
from searchgym.retrievers.index import load_index
from searchgym.retrievers.lucene import Lucene

QUERIES = ["capital of France", "largest city", "Zürich lake", "river", "city", "Curie 1867", "Seine Paris"]
# pyserini's own results on the tiny corpus (k1 0.9, b 0.4): scores rounded to 1e-4, and each tie
# lowered by 1e-6 so that the order (ties by id) is strict.
GOLDEN = {
    "capital of France": [("d1", 0.9912), ("d7", 0.5206), ("d2", 0.5078), ("d3", 0.507799)],
    "river": [("d7", 0.5206), ("d1", 0.4956), ("d4", 0.495599)],
    "Zürich lake": [("d5", 2.3165)],
}


@pytest.fixture(scope="module")
def java():
    """Start the JVM once for the module, or skip saying what is missing."""
    try:
        lucene_module._start_java(None)
    except DependencyNotInstalled as e:
        pytest.skip(f"the lucene backend cannot run here: {e}")


@pytest.fixture(scope="module")
def lucene(java, tiny_corpus_path):
    index = Lucene.from_corpus(tiny_corpus_path)
    yield index
    index.close()


def test_is_a_retriever(lucene):
    assert isinstance(lucene, Retriever) and len(lucene) == 8 and lucene.params == {"k1": 0.9, "b": 0.4}


@pytest.mark.parametrize("query", list(GOLDEN))
def test_golden_ids_and_scores(lucene, query):
    assert [(d.id, round(d.score, 6)) for d in lucene.search(query, k=4)] == GOLDEN[query]


def test_agrees_with_bm25_at_lucene_settings(lucene, tiny_corpus_path):
    """`BM25` with pyserini's k1 and b finds the same top 10, with the same scores up to
    Anserini's rounding."""
    bm25 = BM25.from_corpus(tiny_corpus_path, k1=0.9, b=0.4)
    for query in QUERIES:
        ours, theirs = lucene.search(query, 10), bm25.search(query, 10)
        assert [d.id for d in ours] == [d.id for d in theirs], query
        assert [d.score for d in ours] == pytest.approx([d.score for d in theirs], abs=1e-4)


def test_ties_rank_by_id_whatever_the_indexing_order(java):
    docs = [Doc(i, "x", "same words here") for i in ("b", "a", "10", "9")] + [Doc("c", "y", "other same")]
    for threads in (1, 2):
        index = Lucene.build(docs, threads=threads)
        found = index.search("same words", 10)
        assert [d.id for d in found] == ["10", "9", "a", "b", "c"]  # string order of the ids
        scores = [d.score for d in found]
        assert scores == sorted(scores, reverse=True) and len(set(scores)) == 5
        assert index.search("same words", 2) == found[:2]
        index.close()


def test_title_and_text_come_back_exactly(java):
    docs = [
        Doc("u1", "Smile 😀 Zürich", "line one\nline two 𝔘nicode"),
        Doc("u2", "A title\nwith a newline", "  text with spaces  "),
        Doc("u3", "", "no title at all"),
    ]
    index = Lucene.build(docs)
    for doc in docs:
        assert index.doc(doc.id) == doc
    (hit,) = index.search("Smile", 3)
    assert (hit.id, hit.title, hit.text) == ("u1", docs[0].title, docs[0].text) and hit.score > 0
    assert index.doc("missing") is None
    index.close()


@pytest.mark.parametrize("query", ["", "   ", "the of and", "qwertyuiop", "?!", "日本語"])
def test_queries_without_known_terms_return_nothing(lucene, query):
    assert lucene.search(query, k=3) == []


def test_k_bounds(lucene):
    assert len(lucene.search("city", k=1)) == 1
    assert len(lucene.search("city", k=10**9)) == 4  # capped at the corpus size before Java sees it
    with pytest.raises(ValueError, match="k must be a positive integer"):
        lucene.search("city", k=0)


def test_long_queries_are_answered(lucene):
    """Lucene refuses more than 1024 distinct terms by default; agents paste long texts."""
    query = " ".join(f"word{i}" for i in range(3000)) + " Zürich"
    assert [d.id for d in lucene.search(query, 3)] == ["d5"]
    assert lucene.batch_search([query, "river"], 3, threads=2)[0][0].id == "d5"


@pytest.mark.parametrize("threads", [None, 1, 2, -1])
def test_batch_equals_loop_of_singles(lucene, threads):
    queries = [*QUERIES, "", "river", "unknownword", "capital of France"]
    assert lucene.batch_search(queries, 3, threads=threads) == [lucene.search(q, 3) for q in queries]
    assert lucene.batch_search([], 3) == [] and lucene.batch_search(["", " "], 3) == [[], []]
    with pytest.raises(TypeError, match="sequence of queries"):
        lucene.batch_search("capital", 3)
    with pytest.raises(ConfigError, match="threads must be"):
        lucene.batch_search(queries, 3, threads=-2)


def test_save_load_roundtrip(lucene, tmp_path, tiny_corpus_path):
    lucene.save(tmp_path / "idx")
    meta = json.loads((tmp_path / "idx" / "searchgym.json").read_text())
    assert meta["kind"] == "lucene" and meta["backend"] == "pyserini" and meta["n_docs"] == 8
    assert (meta["k1"], meta["b"]) == (0.9, 0.4)
    loaded = Lucene.load(tmp_path / "idx", threads=2)
    assert len(loaded) == 8 and loaded.n_threads == 2
    for query in QUERIES:
        assert loaded.search(query, 3) == lucene.search(query, 3)
    assert (
        loaded.doc("d6") == lucene.doc("d6") == next(d for d in read_corpus(tiny_corpus_path) if d.id == "d6")
    )
    loaded.set_bm25(1.2, 0.75)  # other parameters score differently, and are saved
    assert loaded.search("river", 3) != lucene.search("river", 3)
    loaded.save(tmp_path / "idx")  # in place
    assert Lucene.load(tmp_path / "idx").params == {"k1": 1.2, "b": 0.75}
    loaded.close()


def test_close_is_idempotent_and_deletes_an_unsaved_index(java, tiny_corpus_path):
    index = Lucene.from_corpus(tiny_corpus_path)
    folder = index._path.parent
    assert folder.is_dir()
    index.close()
    index.close()
    assert not folder.exists()
    with pytest.raises(ValueError, match="closed"):
        index.search("river", 3)


def test_cli_index_build_kind_lucene(java, capsys, tmp_path, tiny_corpus_path):
    argv = ["index", "build", "--corpus", str(tiny_corpus_path), "--kind", "lucene", "--out", str(tmp_path)]
    assert main([*argv, "--no-progress"]) == 0
    assert "lucene index of 8 documents" in capsys.readouterr().out
    index = load_index(tmp_path)
    assert isinstance(index, Lucene) and index.search("Zürich lake", 1)[0].id == "d5"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lucene", "searchgym.json"]
    index.close()


def test_a_repeated_id_is_refused_as_bm25_refuses_it_and_the_old_index_stays(
    java, capsys, tmp_path, tiny_corpus_path
):
    corpus = tmp_path / "dup.jsonl"
    rows = tiny_corpus_path.read_text().splitlines()
    corpus.write_text("\n".join([*rows, "", rows[2]]) + "\n")  # d3 again, after a blank line
    out = tmp_path / "index"
    build = ["index", "build", "--corpus", str(corpus), "--no-progress", "--out", str(out), "--kind"]
    errors = {}
    for kind in ("bm25", "lucene"):
        assert main([*build, kind]) == 2
        errors[kind] = capsys.readouterr().err
    assert errors["lucene"] == errors["bm25"]
    assert f"{corpus}:{len(rows) + 2}: id 'd3' is already on line 3; ids must be unique" in errors["lucene"]
    assert not out.exists()
    with pytest.raises(ConfigError, match="is already on line 3"):
        Lucene.from_corpus(corpus)
    assert main([*build[:3], str(tiny_corpus_path), *build[4:], "lucene"]) == 0
    assert main([*build, "lucene"]) == 2  # a repeated id leaves the index there as it was
    assert load_index(out).search("Zürich lake", 1)[0].id == "d5"


def test_building_and_searching_print_nothing(java, capfd, tiny_corpus_path):
    """Anserini logs to stdout at DEBUG level unless told otherwise; the library never prints."""
    index = Lucene.from_corpus(tiny_corpus_path, threads=2)
    index.batch_search(QUERIES, 3)
    index.close()
    assert capfd.readouterr() == ("", "")


def test_documents_without_words_are_skipped_with_a_warning(java, caplog):
    index = Lucene.build([Doc("a", "Paris", "capital"), Doc("empty", "", " \n ")])
    assert len(index) == 1 and index.doc("empty") is None
    assert "1 documents with no title and no text" in caplog.text
    index.close()
    with pytest.raises(ValueError, match="empty corpus"):
        Lucene.build([])
    with pytest.raises(ValueError, match="empty corpus"):
        Lucene.build([Doc("empty", "", "")])


def test_bad_parameters(java, tmp_path):
    with pytest.raises(ConfigError, match="k1 must be"):
        Lucene.build([Doc("a", "Paris", "capital")], k1=-1)
    with pytest.raises(ConfigError, match="b must be"):
        Lucene.build([Doc("a", "Paris", "capital")], b=2)
    with pytest.raises(DataNotFoundError, match="Lucene.from_corpus"):
        Lucene.load(tmp_path)


def test_a_jvm_started_without_anserini_is_an_error(java):
    code = (
        "import jnius\n"
        "from searchgym.retrievers.lucene import Lucene\n"
        "from searchgym.retrievers import Doc\n"
        "Lucene.build([Doc('a', 'Paris', 'capital')])"
    )
    result = run_python(code, dict(os.environ))
    assert result.returncode != 0 and "before pyserini could put Anserini's jar" in result.stderr


def test_jvm_options_after_the_jvm_started_are_an_error(lucene, tmp_path):
    lucene.save(tmp_path)
    with pytest.raises(ConfigError, match="JVM already runs"):
        Lucene.load(tmp_path, jvm_options=["-Xmx123m"])


def test_pyserini_search_is_never_imported(lucene):
    """It would load torch, transformers and an OpenAI client that needs OPENAI_API_KEY."""
    assert "pyserini.search" not in sys.modules


def test_missing_pyserini_names_the_extra(monkeypatch):
    monkeypatch.setattr(lucene_module, "_java", None)
    monkeypatch.setitem(sys.modules, "pyserini", None)
    with pytest.raises(DependencyNotInstalled, match=r'pip install "searchgym\[lucene\]"'):
        Lucene.build([Doc("a", "Paris", "capital")])


def test_old_java_is_refused():
    with pytest.raises(DependencyNotInstalled, match="needs Java 11 or newer, this JVM is Java 1.8"):
        lucene_module._check_java("1.8")
    lucene_module._check_java("17")


def run_python(code: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)


def test_missing_java_says_how_to_install_it():
    """A process that finds no Java (none on PATH, no JAVA_HOME) gets the apt-get command."""
    if importlib.util.find_spec("pyserini") is None:
        pytest.skip('pyserini is not installed (pip install "searchgym[lucene]")')
    hidden = ("JAVA_HOME", "JDK_HOME", "JRE_HOME", "JVM_PATH")
    env = {key: value for key, value in os.environ.items() if key not in hidden}
    env["PATH"] = os.path.dirname(sys.executable)
    code = (
        "from searchgym.retrievers.lucene import Lucene\n"
        "from searchgym.retrievers import Doc\n"
        "Lucene.build([Doc('a', 'Paris', 'capital')])"
    )
    result = run_python(code, env)
    assert result.returncode != 0
    assert "DependencyNotInstalled" in result.stderr
    assert "apt-get install -y openjdk-17-jdk-headless" in result.stderr


@pytest.mark.slow
def test_jvm_options_from_the_environment_apply(java, tiny_corpus_path):
    env = {**os.environ, lucene_module.JVM_OPTIONS_ENV: "-Xmx200m -Dsearchgym.test=yes"}
    code = (
        "from searchgym.retrievers.lucene import Lucene\n"
        f"index = Lucene.from_corpus({str(tiny_corpus_path)!r})\n"
        "from jnius import autoclass\n"
        "heap = autoclass('java.lang.Runtime').getRuntime().maxMemory() // 2**20\n"
        "print(heap, autoclass('java.lang.System').getProperty('searchgym.test'))"
    )
    result = run_python(code, env)
    assert result.returncode == 0, result.stderr
    heap_mb, flag = result.stdout.split()
    assert int(heap_mb) <= 200 and flag == "yes"
