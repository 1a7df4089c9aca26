import json
import shutil
from collections import Counter
from math import log
from pathlib import Path

import bm25s
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from searchgym.errors import ConfigError, DataNotFoundError
from searchgym.retrievers import BM25, Doc, Retriever, read_corpus
from searchgym.retrievers.analysis import LuceneAnalyzer

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

# The tiny corpus (title + "\n" + text) as Lucene 9's English analyzer (pyserini 0.25) analyzes it.
LUCENE_TERMS = {
    "d1": ["pari", "pari", "capit", "largest", "citi", "franc", "river", "sein"],
    "d2": ["lyon", "lyon", "citi", "franc", "confluenc", "rhône", "saôn"],
    "d3": ["berlin", "berlin", "capit", "germani", "it", "largest", "citi"],
    "d4": ["sein", "sein", "river", "northern", "franc", "flow", "through", "pari"],
    "d5": ["zürich", "zürich", "largest", "citi", "switzerland", "li", "lake", "zürich"],
    "d6": ["mari", "curi", "mari", "curi", "physicist", "chemist", "born", "warsaw", "1867"],
    "d7": ["warsaw", "warsaw", "capit", "poland", "vistula", "river"],
    "d8": ["tricki", "page", "page", "quot", "agent", "answer", "lyon", "answer", "inform", "insid"],
}
QUERY_TERMS = {
    "capital of France": ["capit", "franc"],
    "largest city": ["largest", "citi"],
    "Zürich lake": ["zürich", "lake"],
    "river": ["river"],
}

# Golden results with the defaults (Lucene analyzer, Lucene BM25, k1=0.9, b=0.4), derived by
# `reference_bm25` below from LUCENE_TERMS; pyserini prints the same ids and scores to its 4
# decimals. A change here means retrieval changed: bump the env versions that use it.
GOLDEN = {
    "capital of France": [("d1", 0.991189), ("d7", 0.520569), ("d2", 0.507775)],  # d2 ties d3
    "largest city": [("d3", 0.880435), ("d1", 0.859315), ("d5", 0.859315)],  # a tie: corpus order
    "Zürich lake": [("d5", 2.316464)],
    "river": [("d7", 0.520569), ("d1", 0.495595), ("d4", 0.495595)],  # a tie: corpus order
}
# An index saved before the analyzer choice (bm25s tokens, k1=1.5, b=0.75): it must still score
# so. Up to then, "capital of France" returned d3 third although d2 ties it: now corpus order.
LEGACY_GOLDEN = {
    "capital of France": [("d1", 0.750211), ("d7", 0.423119), ("d2", 0.397668)],
    "largest city": [("d3", 0.689519), ("d1", 0.650398), ("d5", 0.650398)],
    "Zürich lake": [("d5", 1.901406)],
    "river": [("d7", 0.423119), ("d1", 0.375105), ("d4", 0.375105)],
}


def lucene_length(n: int) -> int:
    """Lucene keeps a document's length in one byte: exact below 40, else 24 + (n - 24) cut to
    its 4 leading bits."""
    m = n - 24
    if m < 16:
        return n
    shift = m.bit_length() - 4
    return 24 + (m >> shift << shift)


def reference_bm25(docs: dict[str, list[str]], query: list[str], k: int, k1=0.9, b=0.4, norms=True):
    """Lucene's BM25 written out in float64: idf = ln(1 + (N - df + 0.5) / (df + 0.5)), term
    weight idf * tf / (tf + k1 * (1 - b + b * dl / avgdl)); best first, ties in corpus order."""
    n = len(docs)
    avgdl = sum(map(len, docs.values())) / n
    df = Counter(t for terms in docs.values() for t in set(terms))
    ranked = []
    for i, (doc_id, terms) in enumerate(docs.items()):
        tf, dl = Counter(terms), lucene_length(len(terms)) if norms else len(terms)
        score = sum(
            log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) * tf[t] / (tf[t] + k1 * (1 - b + b * dl / avgdl))
            for t in query
            if tf[t]
        )
        if score > 0:
            ranked.append((-score, i, doc_id))
    return [(doc_id, -score) for score, _, doc_id in sorted(ranked)[:k]]


@pytest.fixture(scope="module")
def bm25(tiny_corpus_path):
    return BM25.from_corpus(tiny_corpus_path)


def test_is_a_retriever(bm25):
    assert isinstance(bm25, Retriever)


@pytest.mark.parametrize("query", list(GOLDEN))
def test_golden_ids_and_scores(bm25, query):
    got = bm25.search(query, k=3)
    assert [d.id for d in got] == [doc_id for doc_id, _ in GOLDEN[query]]
    assert [d.score for d in got] == pytest.approx([s for _, s in GOLDEN[query]], abs=2e-6)


@pytest.mark.parametrize("query", list(GOLDEN))
def test_golden_is_reference_bm25_on_lucene_terms(query):
    expected = [(doc_id, round(s, 6)) for doc_id, s in reference_bm25(LUCENE_TERMS, QUERY_TERMS[query], 3)]
    assert expected == GOLDEN[query]


def test_analyzer_gives_lucene_terms(tiny_corpus_path):
    analyzer = LuceneAnalyzer()
    for doc in read_corpus(tiny_corpus_path):
        assert analyzer(f"{doc.title}\n{doc.text}") == LUCENE_TERMS[doc.id]
    for query, terms in QUERY_TERMS.items():
        assert analyzer(query) == terms


def test_analyzer_follows_lucene_on_hard_cases():
    text = (
        "The U.S.A. isn't John's 1,867.5 e.g. foo:bar foo_bar 3rd a.1 x-ray 東京タワー ‘quoted’ it's "
        "O'Neil's running ponies relational generalization as us km² 8½ İzmir anthology possibly"
    )
    lucene = "u.s.a isn't john 1,867.5 e.g foo:bar foo_bar 3rd 1 x rai 東 京 タワー quot o'neil run poni "
    lucene += "relat gener us km 8 izmir antholog possibl"  # what pyserini 0.25's analyzer returns
    assert LuceneAnalyzer()(text) == lucene.split()
    assert LuceneAnalyzer(stopwords=())("It is the end") == ["it", "is", "the", "end"]


_PIECES = [*"ab1 .,:;'’-_\"\n(é²東İ\u202f", "'s", "U.S."]
_TEXT = st.lists(st.sampled_from(_PIECES), max_size=30).map("".join)


@settings(max_examples=200, deadline=None)
@given(st.lists(_TEXT, min_size=1, max_size=5))
def test_fast_corpus_analysis_equals_the_analyzer(texts):
    analyzer, vocab = LuceneAnalyzer(), {}
    ids = list(analyzer.corpus_terms(texts, vocab))
    terms = {i: t for t, i in vocab.items()}
    assert [[terms[i] for i in row] for row in ids] == [analyzer(t) for t in texts]


def test_long_documents_use_lucenes_one_byte_length():
    words = [f"w{i}" for i in range(41)]  # 41 distinct words: Lucene stores the length as 40
    docs = {"long": words, "short": words[:3], "other": ["x", "y"]}
    bm25 = BM25.build([Doc(doc_id, "", " ".join(terms)) for doc_id, terms in docs.items()])
    (got,) = bm25.search("w1", k=1)
    assert got.id == "short"
    scores = {d.id: d.score for d in bm25.search("w0 w1", k=3)}
    expected = dict(reference_bm25(docs, ["w0", "w1"], 3))
    assert scores == pytest.approx(expected, rel=1e-6)
    assert expected != pytest.approx(dict(reference_bm25(docs, ["w0", "w1"], 3, norms=False)), rel=1e-6)


def test_results_carry_the_stored_document(bm25):
    (doc,) = bm25.search("Zürich lake", k=1)
    assert doc.title == "Zürich" and doc.text.startswith("Zürich is the largest city")


@pytest.mark.parametrize("query", ["", "   ", "the of and", "qwertyuiop", "?!"])
def test_queries_without_known_terms_return_nothing(bm25, query):
    assert bm25.search(query, k=3) == []


def test_k_bounds(bm25):
    assert len(bm25.search("city", k=1)) == 1
    assert len(bm25.search("city", k=100)) <= len(bm25)
    with pytest.raises(ValueError, match="k must be a positive integer"):
        bm25.search("city", k=0)


@pytest.mark.parametrize("n_threads", [1, 2, -1])
def test_batch_equals_loop_of_singles(bm25, n_threads):
    queries = [*GOLDEN, "", "Curie Warsaw 1867", "unknownword", "city city river"] * 3
    bm25.n_threads = n_threads
    try:
        assert bm25.batch_search(queries, k=2) == [bm25.search(q, k=2) for q in queries]
    finally:
        bm25.n_threads = 1
    assert bm25.batch_search([], k=2) == []
    with pytest.raises(TypeError, match="sequence of queries"):
        bm25.batch_search("capital", k=2)


def test_equal_scores_rank_in_corpus_order():
    docs = [Doc(f"d{i:02d}", "", "same words here" if i % 3 else "other words") for i in range(30)]
    bm25 = BM25.build(docs)
    assert [d.id for d in bm25.search("same", k=5)] == ["d01", "d02", "d04", "d05", "d07"]
    assert [d.id for d in bm25.search("words", k=4)] == ["d00", "d03", "d06", "d09"]  # shorter first


def test_top_k_is_the_exhaustive_top_k():
    """The kernel skips postings that cannot reach the top k; it must return what scoring every
    document would: compare with dense scores from the index's own contributions."""
    rng = np.random.default_rng(0)
    vocab = [f"t{i}" for i in range(300)]
    weights = 1 / np.arange(1, len(vocab) + 1)  # Zipf: a few frequent terms, many rare
    texts = [
        " ".join(rng.choice(vocab, size=rng.integers(1, 40), p=weights / weights.sum())) for _ in range(600)
    ]
    bm25 = BM25.build([Doc(str(i), "", t) for i, t in enumerate(texts)])
    data, indices, indptr = (bm25._index.scores[key] for key in ("data", "indices", "indptr"))
    ids = bm25._index.vocab_dict
    queries = [" ".join(rng.choice(vocab, size=rng.integers(1, 7))) for _ in range(300)]
    for k in (1, 3, 10, 50):
        got = bm25.batch_search(queries, k)
        for query, found in zip(queries, got):
            dense = np.zeros(len(texts))
            for t in LuceneAnalyzer()(query):
                dense[indices[indptr[ids[t]] : indptr[ids[t] + 1]]] += data[
                    indptr[ids[t]] : indptr[ids[t] + 1]
                ]
            dense = dense.astype(np.float32)
            order = sorted(np.flatnonzero(dense), key=lambda i: (-dense[i], i))[:k]
            assert [(d.id, d.score) for d in found] == [(str(i), float(dense[i])) for i in order]


def test_save_load_roundtrip(bm25, tmp_path):
    bm25.save(tmp_path / "idx")
    for mmap in (False, True):
        loaded = BM25.load(tmp_path / "idx", mmap=mmap)
        for query in [*GOLDEN, "the city's river Seine flows"]:
            assert loaded.search(query, k=3) == bm25.search(query, k=3)
    assert loaded.doc("d6") == bm25.doc("d6") == Doc("d6", "Marie Curie", bm25.doc("d6").text)
    assert loaded.doc("missing") is None
    meta = json.loads((tmp_path / "idx" / "searchgym.json").read_text())
    assert meta["kind"] == "bm25" and meta["n_docs"] == 8
    assert (meta["analyzer"], meta["k1"], meta["b"], meta["stopwords"]) == ("lucene", 0.9, 0.4, "en")


@pytest.mark.parametrize("query", list(LEGACY_GOLDEN))
def test_index_saved_by_the_previous_version_scores_as_before(query, tmp_path):
    shutil.copytree(FIXTURES / "bm25_index_v0", tmp_path / "v0")
    assert "analyzer" not in json.loads((tmp_path / "v0" / "searchgym.json").read_text())
    old = BM25.load(tmp_path / "v0")
    got = [(d.id, round(d.score, 6)) for d in old.search(query, k=3)]
    assert got == LEGACY_GOLDEN[query]
    old.save(tmp_path / "again")  # and saving it again keeps its analysis
    assert BM25.load(tmp_path / "again").search(query, k=3) == old.search(query, k=3)


def test_bm25s_analyzer_rebuilds_the_legacy_scores(tiny_corpus_path):
    legacy = BM25.from_corpus(tiny_corpus_path, analyzer="bm25s", k1=1.5, b=0.75)
    texts = [f"{d.title}\n{d.text}" for d in read_corpus(tiny_corpus_path)]
    tokens = dict(
        zip(LUCENE_TERMS, bm25s.tokenize(texts, stopwords="en", return_ids=False, show_progress=False))
    )
    for query, expected in LEGACY_GOLDEN.items():
        assert [(d.id, round(d.score, 6)) for d in legacy.search(query, k=3)] == expected
        (terms,) = bm25s.tokenize([query], stopwords="en", return_ids=False, show_progress=False)
        reference = reference_bm25(tokens, terms, 3, k1=1.5, b=0.75, norms=False)
        assert [(d, round(s, 6)) for d, s in reference] == expected


def test_other_methods_still_build(tiny_corpus_path):
    for method in ("robertson", "atire", "bm25l", "bm25+"):
        bm25 = BM25.from_corpus(tiny_corpus_path, method=method)
        assert bm25.search("Zürich lake", k=3)[0].id == "d5"
        assert bm25.batch_search(["river", ""], k=3) == [bm25.search("river", 3), []]


def test_bad_settings_say_what_is_allowed(tiny_corpus_path):
    with pytest.raises(ConfigError, match="analyzer must be one of"):
        BM25.from_corpus(tiny_corpus_path, analyzer="whitespace")
    with pytest.raises(ConfigError, match="method must be one of"):
        BM25.from_corpus(tiny_corpus_path, method="bm26")
    with pytest.raises(ConfigError, match="stopwords must be"):
        BM25.from_corpus(tiny_corpus_path, stopwords="fr")


def test_own_stopwords(tiny_corpus_path):
    bm25 = BM25.from_corpus(tiny_corpus_path, stopwords=["capital", "of"])
    assert bm25.search("capital", k=3) == [] and bm25.params["stopwords"] == ["capital", "of"]
    assert {d.id for d in bm25.search("capital of France", k=5)} == {"d1", "d2", "d4"}
    assert BM25.from_corpus(tiny_corpus_path, stopwords=None).search("the", k=1) != []


def test_load_missing_index_says_how_to_build(tmp_path):
    with pytest.raises(DataNotFoundError, match="BM25.from_corpus"):
        BM25.load(tmp_path)


def test_build_from_search_r1_contents_shape(tmp_path, tiny_corpus_path):
    rows = [{"id": d.id, "contents": f'"{d.title}"\n{d.text}'} for d in read_corpus(tiny_corpus_path)]
    path = tmp_path / "contents.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    same = BM25.from_corpus(path)
    got = [(d.id, round(d.score, 6)) for d in same.search("capital of France", 3)]
    assert got == [
        (d.id, round(d.score, 6)) for d in BM25.from_corpus(tiny_corpus_path).search("capital of France", 3)
    ]


def test_empty_corpus_is_an_error():
    with pytest.raises(ValueError, match="empty corpus"):
        BM25.build([])


def test_ranks_as_pyserini_does():
    """The defaults exist to agree with pyserini (Search-R1's BM25): same top 10, same scores to
    pyserini's 4 decimals, on a generated world and its questions."""
    pytest.importorskip("pyserini", reason='pyserini is an optional extra: pip install "searchgym[lucene]"')
    from searchgym.errors import DependencyNotInstalled
    from searchgym.retrievers.lucene import Lucene
    from searchgym.tasks.world import load_world

    world = load_world(0, 2000)
    docs = [Doc(p["id"], p["title"], p["text"]) for p in world.passages]  # ids in corpus order
    queries = [t.question for t in world.tasks("dev")][:200]
    try:
        lucene = Lucene.build(docs)
    except DependencyNotInstalled as e:
        pytest.skip(str(e))
    try:
        expected = lucene.batch_search(queries, 10)
    finally:
        lucene.close()
    got = BM25.build(docs).batch_search(queries, 10)
    for ours, theirs in zip(got, expected):
        assert [d.id for d in ours] == [d.id for d in theirs]
        assert [d.score for d in ours] == pytest.approx([d.score for d in theirs], abs=2e-4)
