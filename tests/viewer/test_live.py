"""Every run names the env it played; a running trainer's new steps and metrics lines reach an
open viewer (`LiveTable`) with the episodes already shown keeping their numbers; a bad
parameter is answered with a sentence, not a validation dump."""

import doctest
import json
import shutil

import pytest
from fastapi.testclient import TestClient
from viewer_runs import train_metrics, write_step

from searchgym.viewer import create_app, discover, export, jsonl, page, runs, table

BM25 = "searchgym/FictionalQA-BM25-v0"


@pytest.mark.parametrize("module", [runs, table, page, jsonl, export], ids=lambda m: m.__name__)
def test_docstring_examples(module):
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0


def copy_run(source, to):
    shutil.copytree(source, to)
    return to


def test_every_run_names_the_env_it_played_and_its_options(tmp_path, eval_dir, train_dir, sweep_dir):
    other = copy_run(eval_dir, tmp_path / "eval-hops2")
    metrics = json.loads((other / "metrics.json").read_text())
    metrics |= {"env_kwargs": {"split": "test", "hops": [2]}, "simulator": "hf:smollm2-135m-instruct"}
    (other / "metrics.json").write_text(json.dumps(metrics))
    paths = [eval_dir, other, train_dir, sweep_dir, eval_dir / "oracle.jsonl"]
    overview = TestClient(create_app(paths), base_url="http://127.0.0.1").get("/api/overview").json()
    assert [r["env_label"] for r in overview["runs"]] == [
        BM25,  # eval with no -E options
        f"{BM25} (split=test, hops=[2], simulator=hf:smollm2-135m-instruct)",
        f"{BM25} (split=train, max_turns=4, hops=[2])",  # the trainer's config.json
        BM25,  # sweep.json
        BM25,  # a lone episodes file: its folder's metrics.json
    ]
    assert overview["runs"][1]["env_options"] == {
        "split": "test",
        "hops": [2],
        "simulator": "hf:smollm2-135m-instruct",
    }
    assert [r.env for r in discover(paths)] == [BM25] * 5


def test_a_run_that_records_no_env_says_so(tmp_path, train_dir):
    bare = copy_run(train_dir, tmp_path / "bare")
    (bare / "config.json").unlink()
    assert discover([bare])[0].env is None
    assert runs.env_label(None, {}) == "env not recorded"


def test_new_training_steps_and_metrics_lines_reach_an_open_viewer(tmp_path, eval_dir, train_dir):
    run = copy_run(train_dir, tmp_path / "grpo-live")
    client = TestClient(create_app([run, eval_dir], refresh_interval=0), base_url="http://127.0.0.1")
    before = client.get("/api/overview").json()
    assert (before["version"], before["episodes"], len(before["runs"][0]["curves"])) == (0, 24 + 12, 4)
    first_eval = client.get("/api/episode/24").json()
    assert client.get("/api/version").json() == {"version": 0, "problem": None}  # nothing changed

    write_step(run, 5)  # as the trainer does after the viewer started
    with (run / "metrics.jsonl").open("a", encoding="utf-8") as f:
        f.write(json.dumps({"step": 5, **train_metrics(5)}) + "\n")
    assert client.get("/api/version").json()["version"] == 1
    after = client.get("/api/overview").json()
    assert after["version"] == 1 and after["episodes"] == 24 + 12 + 6
    assert [c["step"] for c in after["runs"][0]["curves"]] == [1, 2, 3, 4, 5]
    assert after["sources"][: len(before["sources"])] == before["sources"]  # sources keep their numbers
    assert after["sources"][-1] == {
        "run": 0,
        "label": "step 5",
        "step": 5,
        "n": 6,
        "file": "step-000005.jsonl",
    }
    assert client.get("/api/episode/24").json() == first_eval  # so do the episodes already shown
    assert [s["step"] for s in client.get("/api/steps/0").json()] == [1, 2, 3, 4, 5]
    page = client.get("/api/episodes", params={"runs": "0", "min_step": 5}).json()
    assert page["total"] == 6 and {r["id"] for r in page["rows"]} == set(range(36, 42))
    assert client.get("/api/version").json()["version"] == 1  # and it was read once


def test_a_run_caught_half_written_keeps_the_table_and_says_why(tmp_path, eval_dir):
    run = copy_run(eval_dir, tmp_path / "eval-live")
    client = TestClient(create_app([run], refresh_interval=0), base_url="http://127.0.0.1")
    (run / "metrics.json").write_text('{"env": "searchgym/Fictio')
    answer = client.get("/api/version").json()
    assert answer["version"] == 0 and "metrics.json is not valid JSON" in answer["problem"]
    assert client.get("/api/overview").json()["episodes"] == 12
    (run / "metrics.json").write_text((eval_dir / "metrics.json").read_text())
    assert client.get("/api/version").json() == {"version": 1, "problem": None}


def test_refreshes_are_at_most_one_per_interval(tmp_path, train_dir):
    run = copy_run(train_dir, tmp_path / "grpo-slow")
    client = TestClient(create_app([run], refresh_interval=3600), base_url="http://127.0.0.1")
    write_step(run, 5)
    assert client.get("/api/version").json()["version"] == 0


@pytest.mark.parametrize(
    ("path", "detail"),
    [
        ("/api/episode/abc", "episode='abc': input should be a valid integer"),
        ("/api/compare?a=x&b=1", "a='x': input should be a valid integer"),
        ("/api/compare?a=1", "b is missing"),
        ("/api/steps/0", "there is no training run 0; training runs: 1 (grpo-run)"),
        ("/api/steps/7", "there is no training run 7"),
    ],
)
def test_bad_parameters_are_answered_with_a_sentence(eval_dir, train_dir, path, detail):
    client = TestClient(create_app([eval_dir, train_dir]), base_url="http://127.0.0.1")
    answer = client.get(path)
    assert answer.status_code == 400 and detail in answer.json()["detail"]
