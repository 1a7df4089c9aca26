"""`Dense.build_streaming`: a corpus indexed shard by shard, resumable after an interruption."""

import json

import numpy as np
import pytest

from searchgym.errors import ConfigError
from searchgym.retrievers import Doc, read_corpus, write_corpus
from searchgym.retrievers.dense import Dense
from searchgym.retrievers.encoders import Encoder
from searchgym.retrievers.index import load_index

QUERIES = ["capital of France", "largest city", "Zürich lake", "river", "日本語"]


class Counting:
    """Wraps an Encoder, recording the size of every passage batch; raises after ``fail_after``."""

    def __init__(self, encoder, fail_after=None):
        self.encoder, self.fail_after, self.batches = encoder, fail_after, []

    def __getattr__(self, name):
        return getattr(self.encoder, name)

    def encode_passages(self, passages, **kwargs):
        if self.fail_after is not None and len(self.batches) == self.fail_after:
            raise KeyboardInterrupt("killed")
        self.batches.append(len(passages))
        return self.encoder.encode_passages(passages, **kwargs)


@pytest.fixture(scope="module")
def encoder(tiny_encoder_dir):
    return Encoder(str(tiny_encoder_dir), device="cpu")


def ranked(retriever, k=5):
    return [[(d.id, d.score) for d in row] for row in retriever.batch_search(QUERIES, k)]


def same(a, b):
    assert [[i for i, _ in row] for row in a] == [[i for i, _ in row] for row in b]
    assert [s for row in a for _, s in row] == pytest.approx([s for row in b for _, s in row], abs=1e-5)


def test_matches_the_in_memory_build_holding_one_shard_at_a_time(tiny_corpus_path, encoder, tmp_path):
    counting = Counting(encoder)
    streamed = Dense.build_streaming(tiny_corpus_path, tmp_path / "idx", counting, shard_size=3)
    assert counting.batches == [3, 3, 2]  # never more than a shard of passages at once
    in_memory = Dense.build(read_corpus(tiny_corpus_path), encoder)
    same(ranked(streamed), ranked(in_memory))
    reloaded = Dense.load(tmp_path / "idx", encoder=encoder)
    same(ranked(reloaded), ranked(in_memory))
    doc = next(read_corpus(tiny_corpus_path))
    assert reloaded.doc(doc.id) == doc and reloaded.doc("no such id") is None
    assert not (tmp_path / "idx" / "embeddings").exists()  # removed once the index is written


def test_an_interrupted_build_resumes_without_encoding_again(tiny_corpus_path, encoder, tmp_path):
    out = tmp_path / "idx"
    with pytest.raises(KeyboardInterrupt):
        Dense.build_streaming(tiny_corpus_path, out, Counting(encoder, fail_after=2), shard_size=3)
    assert sorted(p.name for p in (out / "embeddings").glob("shard-*.npy")) == [
        "shard-00000.npy",
        "shard-00001.npy",
    ]
    resumed = Counting(encoder)
    index = Dense.build_streaming(tiny_corpus_path, out, resumed, shard_size=3)
    assert resumed.batches == [2]  # only the last shard
    fresh = Dense.build_streaming(tiny_corpus_path, tmp_path / "fresh", encoder, shard_size=3)
    same(ranked(index), ranked(fresh))


def test_resuming_with_other_settings_is_refused_and_keeps_the_shards(tiny_corpus_path, encoder, tmp_path):
    out = tmp_path / "idx"
    with pytest.raises(KeyboardInterrupt):
        Dense.build_streaming(tiny_corpus_path, out, Counting(encoder, fail_after=1), shard_size=3)
    with pytest.raises(ConfigError, match="shard_size differ"):
        Dense.build_streaming(tiny_corpus_path, out, encoder, shard_size=4)
    assert (out / "embeddings" / "shard-00000.npy").is_file()
    other = tmp_path / "other.jsonl"
    write_corpus([Doc("x", "X", "another corpus")] * 1, other)
    with pytest.raises(ConfigError, match="source"):
        Dense.build_streaming(other, out, encoder, shard_size=3)


def test_kept_float16_embeddings_are_the_vectors_of_the_index(tiny_corpus_path, encoder, tmp_path):
    out = tmp_path / "idx"
    Dense.build_streaming(tiny_corpus_path, out, encoder, shard_size=5, dtype="float16", keep_embeddings=True)
    shards = [np.load(out / "embeddings" / f"shard-0000{i}.npy") for i in range(2)]
    assert [s.shape for s in shards] == [(5, encoder.dim), (3, encoder.dim)] and shards[0].dtype == np.float16
    texts = [f"{d.title}\n{d.text}" for d in read_corpus(tiny_corpus_path)]
    assert np.concatenate(shards) == pytest.approx(encoder.encode_passages(texts), abs=2e-3)
    manifest = json.loads((out / "embeddings" / "manifest.json").read_text())
    assert manifest["n_docs"] == 8 and manifest["encoder"] == encoder.spec()


def test_ivfpq_trains_on_a_sample_across_shards(encoder, tmp_path):
    words = ["river", "lake", "city", "mountain", "capital", "museum", "bridge", "forest", "island", "valley"]
    rng = np.random.default_rng(0)
    docs = [Doc(f"d{i}", words[i % 10], " ".join(rng.choice(words, 6))) for i in range(80)]
    write_corpus(docs, tmp_path / "corpus.jsonl")
    index = Dense.build_streaming(
        tmp_path / "corpus.jsonl",
        tmp_path / "idx",
        encoder,
        shard_size=25,
        index="ivfpq",
        nlist=4,
        m=8,
        nbits=4,
        nprobe=4,
    )
    assert all(len(row) == 5 for row in index.batch_search(QUERIES, 5))
    assert load_index(tmp_path / "idx", encoder=encoder).params["nlist"] == 4


def test_bad_settings_are_clear_errors(tiny_corpus_path, encoder, tmp_path):
    with pytest.raises(ConfigError, match="shard_size must be a positive integer"):
        Dense.build_streaming(tiny_corpus_path, tmp_path / "a", encoder, shard_size=0)
    with pytest.raises(ConfigError, match="dtype must be one of"):
        Dense.build_streaming(tiny_corpus_path, tmp_path / "b", encoder, dtype="int8")
    write_corpus([], tmp_path / "empty.jsonl")
    with pytest.raises(ValueError, match="empty corpus"):
        Dense.build_streaming(tmp_path / "empty.jsonl", tmp_path / "c", encoder)
