import json

import pytest

from searchgym.errors import DataNotFoundError
from searchgym.retrievers import BM25, Doc, Retriever, read_corpus

# Golden results on the committed tiny corpus (bm25s, Lucene BM25, k1=1.5, b=0.75, English
# stopwords). A change here means retrieval changed: bump the env versions that use it.
GOLDEN = {
    "capital of France": [("d1", 0.750211), ("d7", 0.423119), ("d3", 0.397668)],
    "largest city": [("d3", 0.689519), ("d1", 0.650398), ("d5", 0.650398)],
    "Zürich lake": [("d5", 1.901406)],
    "river": [("d7", 0.423119), ("d1", 0.375105), ("d4", 0.375105)],  # a tie: corpus order
}


@pytest.fixture(scope="module")
def bm25(tiny_corpus_path):
    return BM25.from_corpus(tiny_corpus_path)


def test_is_a_retriever(bm25):
    assert isinstance(bm25, Retriever)


@pytest.mark.parametrize("query", list(GOLDEN))
def test_golden_ids_and_scores(bm25, query):
    got = [(d.id, round(d.score, 6)) for d in bm25.search(query, k=3)]
    assert got == GOLDEN[query]


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


def test_batch_equals_loop_of_singles(bm25):
    queries = [*GOLDEN, "", "Curie Warsaw 1867", "unknownword"]
    assert bm25.batch_search(queries, k=2) == [bm25.search(q, k=2) for q in queries]
    assert bm25.batch_search([], k=2) == []
    with pytest.raises(TypeError, match="sequence of queries"):
        bm25.batch_search("capital", k=2)


def test_save_load_roundtrip(bm25, tmp_path):
    bm25.save(tmp_path / "idx")
    loaded = BM25.load(tmp_path / "idx")
    for query in GOLDEN:
        assert loaded.search(query, k=3) == bm25.search(query, k=3)
    assert loaded.doc("d6") == bm25.doc("d6") == Doc("d6", "Marie Curie", bm25.doc("d6").text)
    assert loaded.doc("missing") is None
    meta = json.loads((tmp_path / "idx" / "searchgym.json").read_text())
    assert meta["kind"] == "bm25" and meta["n_docs"] == 8


def test_load_missing_index_says_how_to_build(tmp_path):
    with pytest.raises(DataNotFoundError, match="BM25.from_corpus"):
        BM25.load(tmp_path)


def test_build_from_search_r1_contents_shape(tmp_path, tiny_corpus_path):
    rows = [{"id": d.id, "contents": f'"{d.title}"\n{d.text}'} for d in read_corpus(tiny_corpus_path)]
    path = tmp_path / "contents.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    same = BM25.from_corpus(path)
    assert [(d.id, round(d.score, 6)) for d in same.search("capital of France", 3)] == GOLDEN[
        "capital of France"
    ]


def test_empty_corpus_is_an_error():
    with pytest.raises(ValueError, match="empty corpus"):
        BM25.build([])
