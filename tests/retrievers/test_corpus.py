import json

import pytest

from searchgym.errors import ConfigError, DataNotFoundError
from searchgym.retrievers import Doc, read_corpus, write_corpus
from searchgym.retrievers.corpus import doc_from_row


def test_both_row_shapes():
    ours = doc_from_row({"id": "a", "title": "Zürich", "text": "Stadt am See."})
    theirs = doc_from_row({"id": "a", "contents": '"Zürich"\nStadt am See.'})
    assert ours == theirs == Doc("a", "Zürich", "Stadt am See.")
    assert doc_from_row({"id": 3, "contents": "No quotes\nbody"}) == Doc("3", "No quotes", "body")
    assert doc_from_row({"id": 4, "contents": "only a title"}) == Doc("4", "only a title", "")


def test_roundtrip_keeps_unicode(tmp_path):
    docs = [Doc("1", "Ærøskøbing", "日本語 and emoji 😀"), Doc("2", "", "no title")]
    assert write_corpus(docs, tmp_path / "c.jsonl") == 2
    assert list(read_corpus(tmp_path / "c.jsonl")) == docs
    assert "Ærøskøbing" in (tmp_path / "c.jsonl").read_text(encoding="utf-8")


def test_bad_rows_name_file_and_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"id": "1", "text": "ok"}\n\n{"id": "2"}\n')
    with pytest.raises(ConfigError, match=r"bad.jsonl:3: .*neither 'text' nor 'contents'"):
        list(read_corpus(path))
    path.write_text('{"id": "1", "text": "ok"}\nnot json\n')
    with pytest.raises(ConfigError, match=r"bad.jsonl:2: not valid JSON"):
        list(read_corpus(path))
    path.write_text(json.dumps(["a list"]) + "\n")
    with pytest.raises(ConfigError, match="expected a JSON object"):
        list(read_corpus(path))


def test_missing_file(tmp_path):
    with pytest.raises(DataNotFoundError, match="does not exist"):
        list(read_corpus(tmp_path / "nope.jsonl"))


def test_failed_write_leaves_no_partial_file(tmp_path):
    def docs():
        yield Doc("1", "t", "x")
        raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError):
        write_corpus(docs(), tmp_path / "c.jsonl")
    assert list(tmp_path.iterdir()) == []
