"""`DocStore`: documents of a saved index read from disk by position and by id."""

import json

import numpy as np
import pytest

from searchgym.errors import ConfigError
from searchgym.retrievers import Doc, read_corpus, write_corpus
from searchgym.retrievers.docstore import DOCS_FILE, DocStore, write_docstore

DOCS = [
    Doc("b-2", "Zürich", 'Lake Zürich.\nSecond line with "quotes" and \\ backslash.'),
    Doc("a-10", "日本", "東京は首都です。"),
    Doc("a-9", "", "no title"),
    Doc("c", "Paris", ""),
]


@pytest.fixture
def store(tmp_path):
    assert write_docstore(iter(DOCS), tmp_path) == len(DOCS)  # any iterable, consumed once
    store = DocStore(tmp_path)
    yield store
    store.close()


def test_reads_documents_by_position_exactly(store):
    assert len(store) == len(DOCS)
    assert list(store) == DOCS
    assert store[0] == DOCS[0] and store[-1] == DOCS[-1]
    assert store[1:3] == DOCS[1:3]
    with pytest.raises(IndexError, match="out of range"):
        store[len(DOCS)]


def test_finds_documents_by_id(store):
    for i, doc in enumerate(DOCS):
        assert store.index_of(doc.id) == i
        assert store.get(doc.id) == doc
    for missing in ("a", "a-1", "zz", "", "b-20"):
        assert store.index_of(missing) is None and store.get(missing) is None


def test_the_file_is_a_corpus_other_tools_read(store, tmp_path):
    assert list(read_corpus(tmp_path / DOCS_FILE)) == DOCS


def test_duplicate_ids_are_refused_and_the_old_store_kept(tmp_path):
    write_docstore(DOCS, tmp_path)
    with pytest.raises(ConfigError, match="'c' occurs more than once"):
        write_docstore([*DOCS, Doc("c", "again", "x")], tmp_path)
    assert list(DocStore(tmp_path)) == DOCS
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_a_store_saved_without_its_arrays_is_indexed_on_open(tmp_path):
    write_corpus(DOCS, tmp_path / DOCS_FILE)  # what older versions saved
    with (tmp_path / DOCS_FILE).open("a", encoding="utf-8") as f:
        f.write("\n")  # a trailing blank line is no document
    store = DocStore(tmp_path)
    assert list(store) == DOCS and store.index_of("a-9") == 2


def test_a_changed_file_is_an_error_not_garbage(tmp_path):
    write_docstore(DOCS, tmp_path)
    with (tmp_path / DOCS_FILE).open("a", encoding="utf-8") as f:
        f.write(json.dumps({"id": "new", "title": "", "text": "appended"}) + "\n")
    with pytest.raises(ConfigError, match="changed after the index was built"):
        DocStore(tmp_path)


def test_empty_store(tmp_path):
    assert write_docstore([], tmp_path) == 0
    store = DocStore(tmp_path)
    assert len(store) == 0 and list(store) == [] and store.index_of("x") is None


def test_many_documents_across_write_chunks(tmp_path, monkeypatch):
    monkeypatch.setattr("searchgym.retrievers.docstore._CHUNK", 7)
    docs = [Doc(str(i), f"t{i}", f"text {i}") for i in range(50)]
    write_docstore(docs, tmp_path)
    store = DocStore(tmp_path)
    rng = np.random.default_rng(0)
    for i in rng.permutation(50):
        assert store.get(str(i)) == docs[i]
