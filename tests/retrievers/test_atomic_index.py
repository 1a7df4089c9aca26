"""Index builds replace an index whole or not at all, and loading refuses a directory whose
manifest (the file list in searchgym.json, written last) is missing or does not match."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from test_dense_streaming import Counting

import searchgym
import searchgym.retrievers  # noqa: E402
from searchgym.errors import ConfigError, DataNotFoundError
from searchgym.retrievers import BM25, Doc, write_corpus
from searchgym.retrievers.dense import Dense
from searchgym.retrievers.encoders import Encoder
from searchgym.retrievers.index import build_index, load_index

# searchgym's own code that a build runs: the retrievers and the ground floor
OWN_CODE = tuple(str(Path(m.__file__).resolve().parent) for m in (searchgym, searchgym.retrievers))
OLD = [Doc(f"o{i}", f"Old {i}", f"the old river number {i}") for i in range(5)]
NEW = [Doc(f"n{i}", f"New {i}", f"the new river number {i} and a lake") for i in range(40)]


def interrupted_at(n: int, build) -> int:
    """Run ``build`` with a KeyboardInterrupt at the ``n``-th line executed in searchgym's own
    code (as a Ctrl-C would land; never with n = 0). Returns the lines run."""
    count = 0

    def local(frame, event, arg):
        nonlocal count
        if event == "line":
            count += 1
            if count == n:
                sys.settrace(None)
                raise KeyboardInterrupt(f"line {n}")
        return local

    def tracer(frame, event, arg):
        return local if frame.f_code.co_filename.startswith(OWN_CODE) else None

    sys.settrace(tracer)
    try:
        build()
    except KeyboardInterrupt:
        pass
    finally:
        sys.settrace(None)
    return count


def ids(retriever) -> list[str]:
    return sorted(d.id for d in retriever.search("river", 100))


def test_a_build_interrupted_anywhere_leaves_the_old_index_or_the_new_one(tmp_path):
    corpus, out = tmp_path / "new.jsonl", tmp_path / "idx"
    write_corpus(NEW, corpus)
    BM25.build(OLD).save(out)
    total = interrupted_at(0, lambda: build_index(corpus, "bm25", out))
    seen = set()
    for n in sorted({*range(1, total, 7), *range(total - 40, total)}):  # the swap comes last
        BM25.build(OLD).save(out)
        interrupted_at(n, lambda: build_index(corpus, "bm25", out))
        found = ids(load_index(out))  # never a mix: an IndexError here was the bug
        assert found in ([d.id for d in OLD], sorted(d.id for d in NEW))
        seen.add(found[0])
        left = {p.name for p in tmp_path.iterdir()} - {"idx", "new.jsonl"}
        assert all(name.startswith(".idx.old-") for name in left)  # at most a replaced one, deleted next
    assert total > 500 and seen == {"o0", "n0"}
    build_index(corpus, "bm25", out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["idx", "new.jsonl"]


def test_an_interrupted_first_build_leaves_nothing_that_loads(tmp_path):
    corpus, out = tmp_path / "new.jsonl", tmp_path / "idx"
    write_corpus(NEW, corpus)
    total = interrupted_at(0, lambda: build_index(corpus, "bm25", out))
    for n in range(1, total, 53):
        interrupted_at(n, lambda: build_index(corpus, "bm25", out))
        if out.exists():
            assert ids(load_index(out)) == sorted(d.id for d in NEW)
        else:
            with pytest.raises(DataNotFoundError, match="build one with searchgym index build"):
                load_index(out)


def test_loading_refuses_an_incomplete_or_altered_index(tmp_path):
    BM25.build(OLD).save(tmp_path / "idx")
    meta = json.loads((tmp_path / "idx" / "searchgym.json").read_text())
    assert "docs.jsonl" in meta["files"] and any(name.startswith("bm25s/") for name in meta["files"])
    with (tmp_path / "idx" / "docs.jsonl").open("a") as f:
        f.write('{"id": "extra", "title": "", "text": "x"}\n')
    with pytest.raises(
        DataNotFoundError, match=r"incomplete or altered index \(docs.jsonl is \d+ bytes.*rebuild"
    ):
        load_index(tmp_path / "idx")
    (tmp_path / "idx" / "docs.jsonl").unlink()
    with pytest.raises(DataNotFoundError, match=r"docs.jsonl is missing\); rebuild it with"):
        BM25.load(tmp_path / "idx")
    (tmp_path / "idx" / "searchgym.json").unlink()
    with pytest.raises(DataNotFoundError, match="no complete searchgym index"):
        load_index(tmp_path / "idx")


def test_out_must_be_new_empty_or_an_index(tmp_path):
    write_corpus(NEW, tmp_path / "c.jsonl")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    with pytest.raises(ConfigError, match="already holds files and no searchgym index"):
        build_index(tmp_path / "c.jsonl", "bm25", tmp_path / "mine")
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"
    with pytest.raises(ConfigError, match="is a file, not a directory"):
        build_index(tmp_path / "c.jsonl", "bm25", tmp_path / "c.jsonl" / "idx")
    (tmp_path / "empty").mkdir()
    assert len(build_index(tmp_path / "c.jsonl", "bm25", tmp_path / "empty")) == len(NEW)


def test_saved_index_files_keep_the_umask_permissions(tmp_path):
    BM25.build(OLD).save(tmp_path / "idx")
    mask = os.umask(0)
    os.umask(mask)
    for path in [tmp_path / "idx", tmp_path / "idx" / "searchgym.json", tmp_path / "idx" / "docs.jsonl"]:
        default = 0o777 if path.is_dir() else 0o666
        assert path.stat().st_mode & 0o777 == default & ~mask, path


def test_a_dense_rebuild_keeps_the_old_index_until_it_is_complete_and_still_resumes(
    tiny_encoder_dir, tmp_path
):
    encoder = Encoder(str(tiny_encoder_dir), device="cpu")
    old, new, out = tmp_path / "old.jsonl", tmp_path / "new.jsonl", tmp_path / "idx"
    write_corpus(OLD, old)
    write_corpus(NEW, new)
    Dense.build_streaming(old, out, encoder, shard_size=4)
    with pytest.raises(KeyboardInterrupt):
        Dense.build_streaming(new, out, Counting(encoder, fail_after=2), shard_size=4)
    assert ids(Dense.load(out, encoder=encoder)) == [d.id for d in OLD]  # the old one still serves
    resumed = Counting(encoder)
    Dense.build_streaming(new, out, resumed, shard_size=4)
    assert resumed.batches == [4] * 8  # the two shards encoded before the interruption are kept
    assert ids(Dense.load(out, encoder=encoder)) == sorted(d.id for d in NEW)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["idx", "new.jsonl", "old.jsonl"]
