import subprocess
import sys
import textwrap

import pytest

from searchgym.retrievers import BM25, Cached, Doc, Hybrid


class Fixed:
    """A retriever that returns a fixed ranking, whatever the query."""

    def __init__(self, ids):
        self.ids = ids
        self.calls = 0

    def search(self, query, k=3):
        return self.batch_search([query], k)[0]

    def batch_search(self, queries, k=3):
        self.calls += 1
        return [[Doc(i, i.upper(), "", 1.0) for i in self.ids[:k]] for _ in queries]

    def doc(self, doc_id):
        return None

    def close(self):
        pass


def test_rrf_scores_by_hand():
    fused = Hybrid([Fixed(["a", "b", "c"]), Fixed(["c", "a"])], weights=[1.0, 2.0], rrf_k=1)
    got = {d.id: d.score for d in fused.search("q", k=3)}
    assert got == pytest.approx({"a": 1 / 2 + 2 / 3, "c": 1 / 4 + 2 / 2, "b": 1 / 3})
    assert [d.id for d in fused.search("q", k=3)] == ["c", "a", "b"]


def test_zero_weight_ignores_a_retriever():
    fused = Hybrid([Fixed(["a"]), Fixed(["z"])], weights=[1.0, 0.0])
    assert [d.id for d in fused.search("q", k=3)] == ["a"]


def test_hybrid_bad_arguments():
    with pytest.raises(ValueError, match="one non-negative weight per retriever"):
        Hybrid([Fixed(["a"])], weights=[1.0, 1.0])
    with pytest.raises(ValueError, match="at least one retriever"):
        Hybrid([])


def test_cache_hits_skip_the_inner_retriever(tmp_path):
    inner = Fixed(["a", "b"])
    cache = Cached(inner, tmp_path / "m.sqlite", namespace="x")
    first = cache.batch_search(["q1", "q2", "q1"], 2)
    assert inner.calls == 1 and (cache.hits, cache.misses) == (0, 2)
    assert cache.batch_search(["q2", "q1"], 2) == [first[1], first[0]]
    assert inner.calls == 1 and cache.hits == 2
    cache.search("q1", 1)  # another k is another entry
    assert inner.calls == 2
    other = Cached(inner, tmp_path / "m.sqlite", namespace="y")
    other.search("q1", 2)  # another namespace never shares answers
    assert inner.calls == 3


def test_cache_is_shared_between_processes(tmp_path, tiny_corpus_path):
    path = tmp_path / "memo.sqlite"
    cache = Cached(BM25.from_corpus(tiny_corpus_path), path, namespace="tiny")
    expected = cache.search("capital of France", 3)
    code = textwrap.dedent(
        f"""
        from searchgym.retrievers import Cached

        class Unreachable:
            def batch_search(self, queries, k):
                raise AssertionError("the other process must answer from the cache")

        cache = Cached(Unreachable(), {str(path)!r}, namespace="tiny")
        print([d.id for d in cache.search("capital of France", 3)])
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == str([d.id for d in expected])
