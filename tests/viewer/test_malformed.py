"""A malformed line or file is skipped and counted, never a 500: beside it a good run's rows,
summary and comparison are what they are without it, and the API and the export say what was
skipped (issue 36)."""

import json
import os
import shutil

import pytest
from fastapi.testclient import TestClient
from viewer_runs import MALFORMED, write_broken_run, write_step, write_sweep

from searchgym.cli import main
from searchgym.viewer import EpisodeTable, create_app, discover, export_html
from searchgym.viewer.jsonl import LineIndex, Malformed, read_episode
from searchgym.viewer.query import SORTABLE, Query


def client_of(paths):
    return TestClient(create_app(paths), base_url="http://127.0.0.1", raise_server_exceptions=False)


def ok(client, path, **params):
    answer = client.get(path, params=params)
    assert answer.status_code == 200, (path, params, answer.text[:300])
    return answer.json()


def good_rows(eval_dir):
    return [json.loads(line) for line in (eval_dir / "oracle.jsonl").read_text().splitlines()]


def the_good_run(client):
    """What the API answers of run 0 (the good eval run) and its two agents (sources 0, 1)."""
    summary = ok(client, "/api/summary")
    return {
        "rows": ok(client, "/api/episodes", runs="0", limit=500),
        "sorted": ok(client, "/api/episodes", runs="0", sort="searches", desc="1", limit=500),
        "summary": [g for g in summary["groups"] if g["run"] == 0],
        "filtered": [g for g in ok(client, "/api/summary", hops="2,3")["groups"] if g["run"] == 0],
        "compare": ok(client, "/api/compare", a=0, b=1),
        "episode": ok(client, "/api/episode/5"),
    }


@pytest.fixture(scope="module")
def alone(eval_dir):
    return the_good_run(client_of([eval_dir]))


@pytest.mark.parametrize("case", list(MALFORMED), ids=list(MALFORMED))
def test_a_malformed_line_is_skipped_and_counted_and_the_good_run_is_unchanged(
    case, tmp_path, eval_dir, alone
):
    make, reason = MALFORMED[case]
    rows = good_rows(eval_dir)
    broken = write_broken_run(tmp_path / "broken", rows[:3], [make(rows[0])])
    client = client_of([eval_dir, broken])
    assert the_good_run(client) == alone

    bad = 12 + 2  # the good run's 12 episodes, then the broken run's line 3
    kept = ok(client, "/api/episodes", runs="1", limit=500)
    assert kept["total"] == 3 and [r["id"] for r in kept["rows"]] == [12, 13, 15]
    assert [g["n"] for g in ok(client, "/api/summary", runs="1")["groups"]] == [3]
    for sort in SORTABLE:
        assert ok(client, "/api/episodes", sort=sort, limit=500)["total"] == 15
    assert len(ok(client, "/api/compare", a=2, b=1)["rows"]) == 3  # broken oracle against the good one
    overview = ok(client, "/api/overview")
    assert overview["episodes"] == 16 and overview["sources"][2]["n"] == 3  # lines, then episodes

    skipped = ok(client, "/api/skipped")
    assert skipped["episodes"] == 15
    [entry] = skipped["skipped"]
    assert (entry["run"], entry["lines"], entry["path"]) == (1, 1, str(broken / "oracle.jsonl"))
    assert entry["reasons"][0].startswith("line 3: ") and reason in entry["reasons"][0]
    assert entry["message"].startswith("1 malformed line skipped in ") and reason in entry["message"]

    answer = client.get(f"/api/episode/{bad}")
    assert answer.status_code == 400 and "which is skipped" in answer.json()["detail"]
    assert reason in answer.json()["detail"]
    for gid in (12, 13, 15):
        assert ok(client, f"/api/episode/{gid}")["id"] == gid


def test_read_episode_accepts_every_episode_the_runs_hold(eval_dir, train_dir, injection_dir):
    for path in [
        *eval_dir.glob("*.jsonl"),
        *(train_dir / "episodes").glob("*.jsonl"),
        injection_dir / "evil.jsonl",
    ]:
        for line in path.read_bytes().splitlines():
            read_episode(line)


def test_a_huge_number_or_infinity_where_a_number_is_shown_is_missing_not_an_error(tmp_path, eval_dir):
    rows = good_rows(eval_dir)
    lines = [
        json.dumps({**rows[3], "em": 1e308 * 10}).encode(),
        json.dumps({**rows[4], "f1": float("nan")}).encode(),
    ]
    broken = write_broken_run(tmp_path / "odd", rows[:3], lines)
    client = client_of([broken])
    page = ok(client, "/api/episodes", sort="em", limit=500)
    assert [(r["id"], r["em"]) for r in page["rows"]][-1] == (2, None)  # Infinity: missing, sorted last
    assert ok(client, "/api/episode/2")["em"] is None and ok(client, "/api/skipped")["skipped"] == []


def test_the_first_page_before_the_summaries_are_read_skips_malformed_lines_too(tmp_path, eval_dir):
    rows = good_rows(eval_dir)
    broken = write_broken_run(tmp_path / "broken", rows, [b"[1]", b'{"turns": 5}'])
    quick = EpisodeTable(discover([broken]))
    assert quick.page(Query(limit=2))["rows"] == [quick.row(0), quick.row(1)]  # read line by line
    assert quick._cols is None
    first = quick.page(Query(limit=50))  # holds a malformed line: waits for the summaries
    assert quick._cols is not None and first["total"] == 6
    assert [r["id"] for r in first["rows"]] == [0, 1, 4, 5, 6, 7]
    assert quick.page(Query(limit=3, desc=True))["rows"][0]["id"] == 7


def test_files_that_cannot_be_read_are_skipped_and_said_so(tmp_path, eval_dir, train_dir):
    rows = good_rows(eval_dir)
    broken = write_broken_run(tmp_path / "broken", rows[:3], [])
    (broken / "metrics.json").write_text('{"env": "searchgym/Fict')  # cut short
    os.symlink(tmp_path / "nowhere.jsonl", broken / "ghost.jsonl")
    (broken / "folder.jsonl").mkdir()
    os.mkfifo(broken / "pipe.jsonl")  # opening it to read would wait forever
    (broken / "binary.jsonl").write_bytes(bytes(range(256)) * 4)  # not JSON lines at all

    train = shutil.copytree(train_dir, tmp_path / "grpo-broken")
    (train / "config.json").write_text("[1, 2]")
    metrics = (train / "metrics.jsonl").read_text().splitlines()
    metrics[1:1] = ["not json", '{"step": "two"}']
    (train / "metrics.jsonl").write_text("\n".join(metrics) + "\n")
    with (train / "episodes" / "step-000002.jsonl").open("a") as f:
        f.write('{"turns": "none"}\n')

    sweep = write_sweep(tmp_path / "sweep", eval_dir)
    report = json.loads((sweep / "sweep.json").read_text())
    (sweep / "sweep.json").write_text(json.dumps({**report, "weights": 5}))

    client = client_of([eval_dir, broken, train, sweep])
    overview = ok(client, "/api/overview")
    assert [r["name"] for r in overview["runs"]] == ["eval-bm25", "broken", "grpo-broken", "sweep"]
    assert overview["runs"][1]["env"] is None and overview["runs"][2]["env"] is None
    assert len(overview["runs"][2]["curves"]) == 4 and "weights" not in overview["runs"][3]["metrics"]
    messages = [s["message"] for s in ok(client, "/api/skipped")["skipped"]]
    said = "\n".join(messages)
    for text in (
        "4 malformed lines skipped in ",
        "broken/binary.jsonl: line 1: not JSON (Expecting value: line 1 column 1 (char 0)); "
        "line 2: not UTF-8 text (byte 0x80 at 117)",
        "broken/folder.jsonl skipped: it cannot be read (not a regular file)",
        "broken/ghost.jsonl skipped: it cannot be read (No such file or directory)",
        "broken/metrics.json skipped: it is not valid JSON",
        "broken/pipe.jsonl skipped: it cannot be read (not a regular file)",
        "grpo-broken/config.json skipped: it should hold a JSON object",
        "2 malformed lines skipped in ",
        "metrics.jsonl: line 2: not JSON (Expecting value: line 1 column 1 (char 0)); "
        "line 3: not an object with an integer step",
        "step-000002.jsonl: line 7: turns is a string, not a list",
        "sweep/sweep.json skipped: it has weights that are not a list of objects",
    ):
        assert text in said
    assert len(messages) == 9
    assert [g["n"] for g in ok(client, "/api/summary", runs="1")["groups"]] == [3]
    assert [s["n"] for s in ok(client, "/api/steps/2")] == [6, 6, 6, 6]
    assert ok(client, "/api/compare", a=0, b=1)["rows"]


def test_a_good_line_is_read_the_same_by_the_page_and_the_summaries(tmp_path, eval_dir):
    rows = good_rows(eval_dir)
    path = (
        write_broken_run(tmp_path / "b", rows[:2], [MALFORMED["turns a number"][0](rows[0])]) / "oracle.jsonl"
    )
    index = LineIndex(path)
    found = index.summaries()
    assert found.ok.tolist() == [True, True, False] and found.malformed == 1
    with pytest.raises(Malformed, match="turns is a number, not a list"):
        index.row(2)


def test_export_reports_what_it_skipped_in_one_line_and_leaves_out_a_run_with_nothing(
    tmp_path, eval_dir, capsys
):
    rows = good_rows(eval_dir)
    broken = write_broken_run(tmp_path / "broken", rows[:3], [b"[1]", b'{"turns": 5}'])
    empty = write_broken_run(tmp_path / "empty", [], [b"not json", b"[]"])
    out = tmp_path / "v.html"
    assert main(["view", str(eval_dir), str(broken), str(empty), "--export", str(out)]) == 0
    said = capsys.readouterr()
    [line] = said.err.splitlines()
    assert line.startswith("searchgym view: skipped 4 malformed lines in 2 files: ")
    assert "broken/oracle.jsonl (line 3: a list, not a JSON object)" in line
    assert line.endswith("left out run empty: nothing to show")
    assert "wrote " in said.out and "15 episodes" in said.out
    data = json.loads(out.read_text().split('id="sg-data">', 1)[1].split("</script>", 1)[0])
    assert [r["name"] for r in data["overview"]["runs"]] == ["eval-bm25", "broken"]
    assert [r["id"] for r in data["rows"]][12:] == [12, 13, 16]
    assert [(s["run"], s["lines"]) for s in data["skipped"]["skipped"]] == [(1, 2), (None, 2)]

    done = export_html([eval_dir], tmp_path / "clean.html")
    assert done.report() is None and done.skipped == ()
    assert main(["view", str(empty), "--export", str(tmp_path / "none.html")]) == 2
    assert "nothing to export: 2 malformed lines skipped in" in capsys.readouterr().err


def test_a_run_with_a_file_broken_from_the_start_still_picks_up_new_steps(tmp_path, train_dir):
    train = shutil.copytree(train_dir, tmp_path / "grpo-live")
    (train / "config.json").write_text("{")
    client = TestClient(create_app([train], refresh_interval=0), base_url="http://127.0.0.1")
    write_step(train, 5)
    assert client.get("/api/version").json() == {"version": 1, "problem": None}
    assert ok(client, "/api/overview")["episodes"] == 30
    assert "config.json skipped: it is not valid JSON" in ok(client, "/api/skipped")["skipped"][0]["message"]
