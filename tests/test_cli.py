import json
import re
from collections import Counter

import pytest

from searchgym.agents import load_episodes
from searchgym.cli import main

SMALL = ["-E", "n_passages=300"]


def test_list_prints_registered_ids(capsys):
    assert main(["list"]) == 0
    ids = capsys.readouterr().out.split()
    assert "searchgym/FictionalQA-BM25-v0" in ids and "searchgym/NQ-BM25-v0" in ids


def test_list_prints_each_registry(capsys):
    assert main(["list", "retrievers"]) == 0
    assert capsys.readouterr().out.split()[:5] == ["bm25", "dense", "hybrid", "lucene", "rerank"]
    assert main(["list", "protocols"]) == 0
    assert capsys.readouterr().out.split()[:2] == ["tags", "tool_calls"]
    assert main(["list", "task-sets"]) == 0
    assert {"fictional", "fictional-2hop", "miniwiki", "fanoutqa", "nq"} <= set(
        capsys.readouterr().out.split()
    )


def test_list_rewards_shows_every_term_with_its_level_and_description(capsys, monkeypatch):
    """The terms of real rubrics, each once: a search env's and the planner's step terms, every
    registered episode function (a user's, with its docstring's first sentence) and the trainer's
    ``info_gain`` as `train` adds it."""
    import searchgym
    from searchgym.agents.train.config import GRPOConfig
    from searchgym.agents.train.grpo import training_rubric
    from searchgym.registry import REWARDS

    def answer_is_short(episode) -> float:
        """1 when the answer has fewer than 20 characters. Longer ones score 0."""
        return float(len(episode.prediction or "") < 20)

    monkeypatch.setattr(REWARDS, "_specs", dict(REWARDS._specs))  # the registration ends with the test
    searchgym.register_reward("answer_is_short", answer_is_short)
    assert main(["list", "rewards"]) == 0
    header, *lines = capsys.readouterr().out.splitlines()
    rows = {line.split()[0]: (line.split()[1], line.split(None, 2)[2]) for line in lines}
    assert header.split()[:2] == ["term", "level"] and len(rows) == len(lines)

    rewards = {"terms": dict.fromkeys(REWARDS.names(), 0.1)}  # other tests may have registered some
    assert {"evidence_recall", "answer_is_short"} <= set(rewards["terms"]) < set(searchgym.list_rewards())
    env = searchgym.make("searchgym/FictionalQA-BM25-v0", n_passages=300, rewards=rewards)
    planner = searchgym.make(
        "searchgym/FictionalQA-Planner-v0", n_passages=300, rewards=rewards | {"beyond_rag": 1}
    )
    trained = training_rubric(env, GRPOConfig(rewards={"terms": {"info_gain": 0.5}}))
    expected = {t.name: t.when for r in (trained, planner.unwrapped.rubric) for t in r.terms}
    assert {name: when for name, (when, _) in rows.items()} == expected
    assert set(expected) >= {
        "outcome",
        "format",
        "search_calls",
        "obs_tokens_1k",
        "turns",
        "beyond_rag",
        "info_gain",
    }
    assert rows["answer_is_short"] == (
        "episode",
        "1 when the answer has fewer than 20 characters; weight rewards.terms.answer_is_short",
    )
    assert rows["evidence_recall"][1].startswith("The share of the task's gold evidence documents")
    assert rows["outcome"][1].startswith("the answer's score against the gold answers: EM, F1 or cover EM")
    assert rows["search_calls"][1].endswith("weight -rewards.per_search")
    assert rows["info_gain"] == (
        "trainer",
        "Per turn, how much the turn raised the policy's probability of the gold answer (IGPO); "
        "weight rewards.terms.info_gain",
    )
    env.close()
    planner.close()


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
    for name, agent in report["agents"].items():  # every error has one kind, saved with its episode
        card, saved = agent["failures"], load_episodes(tmp_path / f"{name}.jsonl")
        assert (
            card["failed"]
            == sum(k["count"] for k in card["kinds"].values())
            == sum(ep.em < 1 for ep in saved)
        )
        assert Counter(ep.failure for ep in saved if ep.failure) == {
            k: v["count"] for k, v in card["kinds"].items()
        }
    assert report["agents"]["oracle"]["failures"]["gold_shown"] == 1.0
    assert report["agents"]["oracle"]["failures"]["recall_vs_oracle"] == 1.0  # against its own queries
    assert (tmp_path / "em.png").read_bytes()[:4] == b"\x89PNG"


def test_eval_closed_book_adds_adasearchs_decisions_to_the_card(capsys, tmp_path):
    """The heuristic always searches, so it never skips a search; closed-book it knows nothing of
    the generated world (no right answer), which leaves F1-aware undefined, as the line says."""
    argv = [
        "eval",
        "--agent",
        "heuristic",
        "--n",
        "6",
        "--closed-book",
        "--no-progress",
        "--out",
        str(tmp_path),
    ]
    assert main(argv + SMALL) == 0
    out = capsys.readouterr().out
    assert "heuristic: closed-book right (knew) 0; answered without searching 0 (0 right)" in out
    assert "AdaSearch F1-aware undefined" in out
    closed = load_episodes(tmp_path / "heuristic-closed-book.jsonl")
    assert len(closed) == 6 and all(ep.n_searches == 0 for ep in closed)


def test_eval_table(capsys, tmp_path):
    assert (
        main(["eval", "--agent", "heuristic", "--n", "8", "--no-progress", "--out", str(tmp_path)] + SMALL)
        == 0
    )
    out = capsys.readouterr().out
    assert "EM" in out and "cover-EM" in out and "searches" in out and "heuristic" in out
    assert re.search(r"^heuristic: \d+ of 8 failed.*; gold passages shown \d+%", out, re.M)


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


def test_index_build_refuses_a_kind_that_saves_no_index(capsys, tmp_path, tiny_corpus_path):
    """hybrid and rerank are env backends that combine other kinds at search time: no index of
    theirs is written, and the message names the kinds that are."""
    argv = ["index", "build", "--corpus", str(tiny_corpus_path), "--out", str(tmp_path / "i"), "--kind"]
    for kind in ("hybrid", "rerank"):
        assert main(argv + [kind]) == 2
        err = capsys.readouterr().err
        assert f"a {kind!r} retriever cannot be saved as an index" in err
        assert "Build one of the index kinds (bm25, dense, lucene)" in err
    assert main(argv + ["hybird"]) == 2
    assert "unknown retriever kind 'hybird'. Did you mean 'hybrid'?" in capsys.readouterr().err
    assert not (tmp_path / "i").exists()


def test_dense_options_need_kind_dense(capsys, tmp_path, tiny_corpus_path):
    argv = ["index", "build", "--corpus", str(tiny_corpus_path), "--out", str(tmp_path), "--index", "hnsw"]
    assert main(argv) == 2
    assert "--index only apply to --kind dense" in capsys.readouterr().err


def test_eval_with_a_simulated_search_engine(capsys, tmp_path, scripted_backend):
    argv = ["eval", "--env", "searchgym/FictionalQA-Simulated-v0", "--agent", "oracle,heuristic"]
    argv += ["--simulator", "scripted:docs", "--n", "6", "--json", "--no-progress", "--out", str(tmp_path)]
    assert main(argv + SMALL) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["simulator"] == "scripted:docs" and report["env_kwargs"] == {"n_passages": 300}
    oracle, heuristic = report["agents"]["oracle"]["all"], report["agents"]["heuristic"]["all"]
    assert oracle["em"] == 1.0 and oracle["searches"] >= 1.0 and heuristic["searches"] == 1.0
    episodes = load_episodes(tmp_path / "oracle.jsonl")
    assert "It is " + episodes[0].answers[0] in episodes[0].turns[0].observation
    assert len(scripted_backend.prompts) == sum(ep.n_searches for ep in episodes) + 6  # heuristic: 1 each


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--simulator", "scripted:docs"], "searchgym/FictionalQA-BM25-v0 takes no generator"),
        (["--env", "searchgym/FictionalQA-Simulated-v0", "--simulator", "docs"], "takes BACKEND:MODEL"),
        (["--env", "searchgym/FictionalQA-Simulated-v0"], "--simulator hf:smollm2-135m-instruct"),
    ],
)
def test_simulator_errors(capsys, scripted_backend, argv, message):
    assert main(["eval", "--agent", "oracle", "--n", "2", *argv, *SMALL]) == 2
    assert message in capsys.readouterr().err
