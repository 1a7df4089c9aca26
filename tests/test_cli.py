import json

import pytest

from searchgym.agents import load_episodes
from searchgym.cli import main

SMALL = ["-E", "n_passages=300"]


def test_list_prints_registered_ids(capsys):
    assert main(["list"]) == 0
    ids = capsys.readouterr().out.split()
    assert "searchgym/FictionalQA-BM25-v0" in ids and "searchgym/NQ-BM25-v0" in ids


def test_eval_json_metrics_trajectories_and_plot(capsys, tmp_path):
    argv = [
        "eval",
        "--agent",
        "oracle,random",
        "--n",
        "12",
        "--json",
        "--no-progress",
        "--out",
        str(tmp_path),
    ]
    assert main(argv + SMALL) == 0
    report = json.loads(capsys.readouterr().out)  # stdout holds exactly one JSON object
    assert report["n"] == 12 and list(report["agents"]) == ["oracle", "random"]
    oracle = report["agents"]["oracle"]["all"]
    assert oracle["em"] == 1.0 and oracle["invalid_rate"] == 0.0
    assert set(oracle) >= {"em", "f1", "cover_em", "searches", "turns", "invalid_rate", "evidence_recall"}
    assert report["agents"]["random"]["all"]["em"] < 0.5
    assert len(load_episodes(tmp_path / "oracle.jsonl")) == 12
    assert json.loads((tmp_path / "metrics.json").read_text())["n"] == 12
    assert (tmp_path / "em.png").read_bytes()[:4] == b"\x89PNG"


def test_eval_table(capsys, tmp_path):
    assert (
        main(["eval", "--agent", "heuristic", "--n", "8", "--no-progress", "--out", str(tmp_path)] + SMALL)
        == 0
    )
    out = capsys.readouterr().out
    assert "EM" in out and "cover-EM" in out and "searches" in out and "heuristic" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["eval", "--agent", "oracel", "--n", "2"], "unknown agent 'oracel'. Did you mean 'oracle'"),
        (["eval", "--env", "searchgym/FictionalQA-v0", "--n", "2"], "Did you mean"),
        (["eval", "--n", "0"], "--n must be at least 1"),
        (["eval", "-E", "split=nope", "--n", "2"] + SMALL, "split"),
    ],
)
def test_bad_input_is_a_clear_error(capsys, argv, message):
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_bad_env_arg_syntax(capsys):
    with pytest.raises(SystemExit):
        main(["eval", "-E", "novalue"])
    assert "expected KEY=VALUE" in capsys.readouterr().err


def test_index_build_then_load(capsys, tmp_path, tiny_corpus_path):
    from searchgym.retrievers import BM25
    from searchgym.retrievers.index import load_index

    assert main(["index", "build", "--corpus", str(tiny_corpus_path), "--out", str(tmp_path / "i")]) == 0
    assert "bm25 index of 8 documents" in capsys.readouterr().out
    index = load_index(tmp_path / "i")
    assert isinstance(index, BM25) and index.search("Zürich lake", 1)[0].id == "d5"


def test_dense_index_build(capsys, tmp_path, tiny_corpus_path, tiny_encoder_dir):
    from searchgym.retrievers import Dense
    from searchgym.retrievers.index import load_index

    argv = [
        "index",
        "build",
        "--corpus",
        str(tiny_corpus_path),
        "--out",
        str(tmp_path / "d"),
        "--kind",
        "dense",
    ]
    options = ["--encoder", str(tiny_encoder_dir), "--index", "hnsw", "--shard-size", "3"]
    options += ["--keep-embeddings"]
    assert main(argv + options + ["--no-progress"]) == 0
    index = load_index(tmp_path / "d")
    assert isinstance(index, Dense) and len(index.search("capital of France", 3)) == 3
    assert len(list((tmp_path / "d" / "embeddings").glob("shard-*.npy"))) == 3  # 8 passages, 3 a shard


def test_dense_options_need_kind_dense(capsys, tmp_path, tiny_corpus_path):
    argv = ["index", "build", "--corpus", str(tiny_corpus_path), "--out", str(tmp_path), "--index", "hnsw"]
    assert main(argv) == 2
    assert "--index only apply to --kind dense" in capsys.readouterr().err
