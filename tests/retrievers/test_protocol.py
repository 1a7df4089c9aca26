"""Every backend honours the `Retriever` contract the same way.

"dense" uses a tiny random encoder: its ranking is arbitrary, every non-empty query has
neighbours, and batched encoding changes scores by float rounding (about 1e-7). "rerank" re-scores
BM25 with a tiny random cross-encoder; its batched scores differ by float rounding too.
"""

import pytest

from searchgym.errors import DependencyNotInstalled
from searchgym.retrievers import BM25, Cached, Hybrid, Rerank, Retriever
from searchgym.retrievers.dense import Dense
from searchgym.retrievers.lucene import Lucene
from searchgym.retrievers.remote import Remote
from searchgym.retrievers.server import ServerThread, create_app

QUERIES = ["capital of France", "largest city", "Zürich lake", "river", "Curie 1867", "日本語", ""]


@pytest.fixture(scope="module")
def bm25(tiny_corpus_path):
    return BM25.from_corpus(tiny_corpus_path)


@pytest.fixture(scope="module")
def dense(tiny_corpus_path, tiny_encoder_dir):
    return Dense.from_corpus(tiny_corpus_path, str(tiny_encoder_dir))


@pytest.fixture(scope="module")
def remote(bm25):
    """A client of a server that the test starts on loopback, serving the BM25 index."""
    with ServerThread(create_app(bm25)) as server, Remote(server.url) as client:
        yield client


@pytest.fixture(scope="module")
def rerank(bm25, tiny_cross_encoder_dir):
    return Rerank(bm25, str(tiny_cross_encoder_dir), device="cpu")


@pytest.fixture(scope="module")
def lucene(tiny_corpus_path):
    try:
        index = Lucene.from_corpus(tiny_corpus_path)
    except DependencyNotInstalled as e:  # pyserini or Java missing
        pytest.skip(f"the lucene backend cannot run here: {e}")
    yield index
    index.close()


@pytest.fixture(params=["bm25", "hybrid", "cached", "dense", "remote", "rerank", "lucene"])
def retriever(request, bm25, tmp_path):
    if request.param == "bm25":
        return bm25
    if request.param in ("dense", "remote", "rerank", "lucene"):
        return request.getfixturevalue(request.param)
    if request.param == "hybrid":
        stemless = BM25.from_corpus(request.getfixturevalue("tiny_corpus_path"), k1=0.9, b=0.4)
        return Hybrid([bm25, stemless], weights=[1.0, 0.5])
    return Cached(bm25, tmp_path / "memo.sqlite", namespace="tiny")


def test_is_a_retriever(retriever):
    assert isinstance(retriever, Retriever)


@pytest.mark.parametrize("k", [1, 2, 5])
def test_shapes_order_and_k(retriever, k):
    for query in QUERIES:
        docs = retriever.search(query, k)
        assert len(docs) <= k
        assert [d.score for d in docs] == sorted((d.score for d in docs), reverse=True)
        assert len({d.id for d in docs}) == len(docs)


def test_empty_unknown_and_unicode_queries(retriever):
    assert retriever.search("", 3) == []
    if isinstance(retriever, Dense):  # unknown words still have nearest neighbours
        assert len(retriever.search("日本語", 3)) == 3 and len(retriever.search("Zürich", 3)) == 3
        return
    assert retriever.search("日本語", 3) == []
    assert retriever.search("Zürich", 3)[0].id == "d5"


def test_batch_equals_loop_of_singles(retriever):
    batched, singles = retriever.batch_search(QUERIES, 3), [retriever.search(q, 3) for q in QUERIES]
    if isinstance(retriever, (Dense, Rerank)):  # same ids, scores equal up to float rounding
        assert [[d.id for d in r] for r in batched] == [[d.id for d in r] for r in singles]
        batched, singles = ([d.score for r in x for d in r] for x in (batched, singles))
        singles = pytest.approx(singles, abs=1e-5)
    assert batched == singles
    assert retriever.batch_search([], 3) == []


def test_bad_k(retriever):
    with pytest.raises(ValueError, match="k must be a positive integer"):
        retriever.search("city", 0)


def test_doc_lookup(retriever):
    assert retriever.doc("d1").title == "Paris" and retriever.doc("nope") is None
