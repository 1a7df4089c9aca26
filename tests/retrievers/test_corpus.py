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


# -- text no backend takes: lone surrogates (JSON "\ud800") and NULs -------------------------------
UNCLEAN_ROWS = [
    {"id": "a", "title": "Paris", "text": "Capital of France."},
    {"id": "b", "title": "Lone \ud800 title", "text": "Broken \udc80 text."},
    {"id": "c", "contents": '"NUL"\nA \x00 in the text.'},
]


def write_rows(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")  # escapes: \ud800
    return path


def test_lone_surrogates_and_nuls_in_text_become_u_fffd_with_one_warning_naming_the_line(tmp_path, caplog):
    """They are cleaned, not refused: one broken character in a passage of a large dump should
    not stop its build, and U+FFFD is what every UTF-8 decoder writes for it."""
    path = write_rows(tmp_path / "c.jsonl", UNCLEAN_ROWS)
    with caplog.at_level("WARNING", logger="searchgym.retrievers.corpus"):
        docs = list(read_corpus(path))
    assert docs[0] == Doc("a", "Paris", "Capital of France.")
    assert docs[1] == Doc("b", "Lone \ufffd title", "Broken \ufffd text.")
    assert docs[2] == Doc("c", "NUL", "A \ufffd in the text.")
    (warning,) = caplog.messages
    assert (
        warning.startswith(f"{path}:2: lone surrogates or NULs replaced by U+FFFD")
        and "2 document(s) (lines 2, 3)" in warning
    )


def test_an_id_with_a_lone_surrogate_or_nul_is_an_error_naming_the_line(tmp_path):
    """Ids are keys matched exactly (qrels, evidence): cleaning one could merge two documents."""
    for bad_id in ["x\ud800", "x\x00"]:
        path = write_rows(tmp_path / "c.jsonl", [UNCLEAN_ROWS[0], {"id": bad_id, "text": "t"}])
        with pytest.raises(
            ConfigError, match=r"c.jsonl:2: id 'x\\(ud800|x00)' holds a lone surrogate or a NUL"
        ):
            list(read_corpus(path))


@pytest.mark.parametrize("kind", ["bm25", "dense", "lucene"])
def test_index_build_takes_such_text_and_refuses_such_an_id_in_one_line(
    request, kind, tmp_path, caplog, capsys
):
    """``searchgym index build`` built no index over it before (a UnicodeEncodeError or
    TypeError traceback); now the text is searchable as U+FFFD and a bad id is exit 2."""
    from searchgym.cli import main
    from searchgym.retrievers.index import load_index

    extra = ["--encoder", str(request.getfixturevalue("tiny_encoder_dir"))] if kind == "dense" else []
    if kind == "lucene":
        from searchgym.retrievers.lucene import _start_java

        try:
            _start_java(None)
        except Exception as e:  # no pyserini, no JDK: say which
            pytest.skip(f"the lucene backend cannot run here: {e}")
    corpus = write_rows(tmp_path / "c.jsonl", UNCLEAN_ROWS)
    argv = ["index", "build", "--corpus", str(corpus), "--kind", kind, "--no-progress", *extra]
    with caplog.at_level("WARNING", logger="searchgym.retrievers.corpus"):
        assert main([*argv, "--out", str(tmp_path / "index")]) == 0
    assert any(m.startswith(f"{corpus}:2: lone surrogates or NULs") for m in caplog.messages)
    index = load_index(tmp_path / "index")
    assert index.doc("b") == Doc("b", "Lone \ufffd title", "Broken \ufffd text.")
    assert {d.id for d in index.search("Broken text", k=3)} >= ({"b"} if kind != "dense" else set())
    index.close()

    write_rows(corpus, [*UNCLEAN_ROWS, {"id": "d\udc80", "text": "t"}])
    capsys.readouterr()
    assert main([*argv, "--out", str(tmp_path / "again")]) == 2
    last = capsys.readouterr().err.splitlines()[-1]  # after transformers' loading bar, for dense
    assert last.startswith(f"searchgym: error: {corpus}:4: id 'd\\udc80' holds a lone surrogate")
