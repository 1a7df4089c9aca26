"""Rerank over BM25 with a tiny random cross-encoder built here (no download). Its ranking is
arbitrary, so every expected order comes from scores the test computes with the model itself."""

import math
import shutil
from dataclasses import replace

import pytest
import torch
from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer

from searchgym.errors import ConfigError, DataNotFoundError
from searchgym.retrievers import BM25, Doc, Rerank, Retriever

QUERIES = ["capital of France", "largest city", "Zürich lake", "river", "Curie 1867", "日本語", ""]
LONG_QUERY = "which city is the capital " * 40  # longer than the tiny model's 64 positions


class Counting:
    """A retriever that forwards to another and records the calls it gets."""

    def __init__(self, inner):
        self.inner, self.batch_ks, self.singles, self.closed = inner, [], 0, False

    def search(self, query, k=3):
        self.singles += 1
        return self.inner.search(query, k)

    def batch_search(self, queries, k=3):
        self.batch_ks.append(k)
        return self.inner.batch_search(queries, k)

    def doc(self, doc_id):
        return self.inner.doc(doc_id)

    def close(self):
        self.closed = True


class Fixed:
    """A retriever that returns the same documents, in order, whatever the query."""

    def __init__(self, docs):
        self.docs = docs

    def search(self, query, k=3):
        return self.docs[:k]

    def batch_search(self, queries, k=3):
        return [self.docs[:k] for _ in queries]

    def doc(self, doc_id):
        return None

    def close(self):
        pass


@pytest.fixture(scope="module")
def bm25(tiny_corpus_path):
    return BM25.from_corpus(tiny_corpus_path)


@pytest.fixture(scope="module")
def reranker(bm25, tiny_cross_encoder_dir):
    return Rerank(bm25, str(tiny_cross_encoder_dir), device="cpu")


def with_labels(source, directory, num_labels):
    """A copy of the tiny cross-encoder with a fresh random ``num_labels``-way head."""
    shutil.copytree(source, directory)
    config = AutoConfig.from_pretrained(source)
    config.num_labels = num_labels
    torch.manual_seed(1)  # test code: the same random model in every run
    AutoModelForSequenceClassification.from_config(config).save_pretrained(directory)
    return str(directory)


def direct_scores(model_dir, query, docs):
    """Score each (query, doc) pair alone with transformers, as the model's users would."""
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    scores = []
    with torch.no_grad():
        for d in docs:
            pair = tokenizer(
                query, f"{d.title}\n{d.text}", truncation="only_second", max_length=64, return_tensors="pt"
            )
            logits = model(**pair).logits[0]
            scores.append(float(logits[0]) if len(logits) == 1 else float(logits[1] - logits[0]))
    return scores


def expected_ranking(model_dir, query, candidates, k):
    scores = direct_scores(model_dir, query, candidates)
    order = sorted(range(len(candidates)), key=lambda j: -scores[j])
    return [candidates[j].id for j in order[:k]], [scores[j] for j in order[:k]]


def forward_batch_sizes(reranker):
    """A list that fills with the batch size of every forward pass of the reranker's model."""
    sizes = []
    handle = reranker.model.register_forward_pre_hook(
        lambda _, args, kw: sizes.append(len(kw["input_ids"])), with_kwargs=True
    )
    return sizes, handle


def test_order_is_by_the_cross_encoder_score(reranker, bm25, tiny_cross_encoder_dir):
    assert isinstance(reranker, Retriever)
    moved = False
    for query in QUERIES[:5]:
        candidates = bm25.search(query, 50)
        ids, scores = expected_ranking(str(tiny_cross_encoder_dir), query, candidates, 5)
        got = reranker.search(query, 5)
        assert [d.id for d in got] == ids
        assert [d.score for d in got] == pytest.approx(scores, abs=1e-5)
        by_id = {d.id: d for d in candidates}
        assert all(d == replace(by_id[d.id], score=d.score) for d in got)  # only the score changes
        moved |= ids != [d.id for d in candidates[:5]]
    assert moved, "the cross-encoder should reorder BM25's ranking for some query"


def test_depth_bounds_the_candidates(bm25, tiny_cross_encoder_dir):
    counting = Counting(bm25)
    shallow = Rerank(counting, str(tiny_cross_encoder_dir), depth=2, device="cpu")
    for query in QUERIES[:5]:
        top2 = [d.id for d in bm25.search(query, 2)]
        got = shallow.search(query, 1)
        assert len(got) == 1 and got[0].id in top2
        assert {d.id for d in shallow.search(query, 2)} == set(top2)
    assert len(shallow.search("capital of France", 4)) == 4  # k above depth fetches k candidates
    assert counting.batch_ks == [2, 2] * 5 + [4]


def test_one_first_stage_call_and_shared_mini_batches(bm25, tiny_cross_encoder_dir):
    counting = Counting(bm25)
    rerank = Rerank(counting, str(tiny_cross_encoder_dir), batch_size=4, device="cpu")
    n_pairs = sum(len(bm25.search(q, 50)) for q in QUERIES)
    sizes, handle = forward_batch_sizes(rerank)
    try:
        rerank.batch_search(QUERIES, 3)
    finally:
        handle.remove()
    assert counting.batch_ks == [50] and counting.singles == 0
    # the pairs of all queries share mini-batches: only the last one is short
    assert sum(sizes) == n_pairs and sizes == [4] * (n_pairs // 4) + ([n_pairs % 4] if n_pairs % 4 else [])


def test_empty_queries_skip_both_stages(bm25, tiny_cross_encoder_dir):
    counting = Counting(bm25)
    rerank = Rerank(counting, str(tiny_cross_encoder_dir), device="cpu")
    sizes, handle = forward_batch_sizes(rerank)
    try:
        assert rerank.batch_search(["", "   "], 3) == [[], []]
        assert rerank.search("日本語", 3) == []  # no first-stage candidates: nothing to score
    finally:
        handle.remove()
    assert counting.batch_ks == [50] and sizes == []  # one call, for the one non-empty query


def test_batch_equals_loop_of_singles(reranker):
    queries = [*QUERIES, LONG_QUERY, "capital of France"]
    batched, singles = reranker.batch_search(queries, 3), [reranker.search(q, 3) for q in queries]
    assert [[d.id for d in r] for r in batched] == [[d.id for d in r] for r in singles]
    flat = [d.score for r in batched for d in r]
    assert flat == pytest.approx([d.score for r in singles for d in r], abs=1e-5)
    assert batched[-1] == batched[0]
    assert reranker.batch_search([], 3) == []


def test_long_query_is_cut_to_leave_room_for_the_passage(reranker, bm25):
    got = reranker.search(LONG_QUERY, 3)
    assert [d.id for d in got] and {d.id for d in got} <= {d.id for d in bm25.search(LONG_QUERY, 50)}
    assert all(math.isfinite(d.score) for d in got)


def test_ties_keep_the_first_stage_order(tiny_cross_encoder_dir):
    same = [Doc(i, "Paris", "Paris is the capital of France.", 1.0) for i in ("b", "c", "a")]
    rerank = Rerank(Fixed(same), str(tiny_cross_encoder_dir), batch_size=1, device="cpu")
    got = rerank.search("capital", 3)
    assert [d.id for d in got] == ["b", "c", "a"] and len({d.score for d in got}) == 1


def test_two_label_model_scores_the_log_odds_of_relevant(bm25, tiny_cross_encoder_dir, tmp_path):
    two = with_labels(tiny_cross_encoder_dir, tmp_path / "two", 2)
    rerank = Rerank(bm25, two, device="cpu")
    candidates = bm25.search("capital of France", 50)
    ids, scores = expected_ranking(two, "capital of France", candidates, 3)
    got = rerank.search("capital of France", 3)
    assert [d.id for d in got] == ids and [d.score for d in got] == pytest.approx(scores, abs=1e-5)
    tokenizer = AutoTokenizer.from_pretrained(two)
    model = AutoModelForSequenceClassification.from_pretrained(two).eval()
    with torch.no_grad():
        pair = tokenizer("capital of France", f"{got[0].title}\n{got[0].text}", return_tensors="pt")
        p = model(**pair).logits[0].softmax(-1)
    assert got[0].score == pytest.approx(math.log(float(p[1] / p[0])), abs=1e-5)


def test_other_label_counts_are_a_config_error(tiny_cross_encoder_dir, tmp_path):
    three = with_labels(tiny_cross_encoder_dir, tmp_path / "three", 3)
    with pytest.raises(ConfigError, match=r"has 3 output labels; a cross-encoder for reranking has 1"):
        Rerank(Fixed([]), three, device="cpu")


def test_missing_model_names_it_and_how_to_fix(tmp_path, monkeypatch):
    absent = tmp_path / "no-such-model"
    with pytest.raises(
        DataNotFoundError, match=r"cannot load cross-encoder .*no-such-model.*local directory"
    ):
        Rerank(Fixed([]), str(absent))
    absent.mkdir()
    with pytest.raises(DataNotFoundError, match="holds no config.json"):
        Rerank(Fixed([]), str(absent))
    import huggingface_hub.constants

    # offline, a hub id not in the cache fails at once instead of retrying the network
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(DataNotFoundError, match=r"'searchgym-tests/no-such-reranker'.*HF_HUB_OFFLINE=1"):
        Rerank(Fixed([]), "searchgym-tests/no-such-reranker")


def test_bad_arguments(tiny_cross_encoder_dir):
    for name, value in (("depth", 0), ("batch_size", True), ("max_length", -1)):
        with pytest.raises(ConfigError, match=f"{name} must be a positive integer"):
            Rerank(Fixed([]), str(tiny_cross_encoder_dir), **{name: value})
    with pytest.raises(ValueError, match="k must be a positive integer"):
        Rerank(Fixed([]), str(tiny_cross_encoder_dir), device="cpu").search("paris", 0)


def test_doc_and_close_delegate(bm25, tiny_cross_encoder_dir):
    counting = Counting(bm25)
    rerank = Rerank(counting, str(tiny_cross_encoder_dir), max_length=32, device="cpu")
    assert rerank.max_length == 32
    assert rerank.doc("d1").title == "Paris" and rerank.doc("nope") is None
    rerank.close()
    assert counting.closed
