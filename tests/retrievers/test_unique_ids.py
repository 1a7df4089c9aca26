"""`unique_ids` finds a repeated id as `read_corpus` does, with its message and lines, across
batches and merged runs, keeping 8 bytes a document instead of a dict of ids."""

import json

import pytest

from searchgym.errors import ConfigError
from searchgym.retrievers import read_corpus
from searchgym.retrievers import unique_ids as module
from searchgym.retrievers.unique_ids import unique_ids

BATCH = 100  # instead of 10,000, so that a test crosses batches and merges in little time


@pytest.fixture(autouse=True)
def small_batches(monkeypatch):
    monkeypatch.setattr(module, "BATCH", BATCH)


def write(path, ids, blank_every=0):
    lines = []
    for i, doc_id in enumerate(ids):
        if blank_every and i % blank_every == 0:
            lines.append("")
        lines.append(json.dumps({"id": doc_id, "text": f"text {i}"}))
    path.write_text("\n".join(lines) + "\n")
    return path


def error_of(docs):
    with pytest.raises(ConfigError) as caught:
        list(docs)
    return str(caught.value)


N = 3 * BATCH + 17  # four batches: three merges of sorted runs, then a short last batch


@pytest.mark.parametrize(
    ("first", "again"),
    [(5, 9), (5, BATCH + 3), (BATCH - 1, BATCH), (17, 2 * BATCH + 5), (BATCH + 2, N - 1), (0, N - 1)],
)
def test_a_repeated_id_is_the_error_read_corpus_gives(tmp_path, first, again):
    ids = [f"d{i}" for i in range(N)]
    ids[again] = ids[first]
    path = write(tmp_path / "c.jsonl", ids, blank_every=7)
    expected = error_of(read_corpus(path))
    assert error_of(unique_ids(path, read_corpus(path, unique_ids=False))) == expected
    assert "is already on line" in expected


def test_an_integer_id_repeats_its_string(tmp_path):
    path = write(tmp_path / "c.jsonl", ["1", "2", 1])
    assert error_of(unique_ids(path, read_corpus(path, unique_ids=False))).endswith(
        "c.jsonl:3: id '1' is already on line 1; ids must be unique"
    )


def test_unique_ids_pass_through_in_order(tmp_path):
    ids = [f"d{i}" for i in range(N)]
    path = write(tmp_path / "c.jsonl", ids)
    assert [d.id for d in unique_ids(path, read_corpus(path, unique_ids=False))] == ids


def test_a_repeated_hash_of_two_different_ids_is_no_error(tmp_path):
    path = write(tmp_path / "c.jsonl", ["a", "b", "c"])
    module._raise_if_repeated(path, {hash("b")}, 3)  # "b" once: a collision, not a repeat
    with pytest.raises(ConfigError, match="c.jsonl:2: id 'a' is already on line 1"):
        module._raise_if_repeated(write(tmp_path / "c.jsonl", ["a", "a"]), {hash("a")}, 2)
