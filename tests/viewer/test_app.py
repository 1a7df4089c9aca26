"""The viewer's HTTP API, its safety headers, the static export and `searchgym view`."""

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from viewer_runs import INJECTION

from searchgym.cli import main
from searchgym.viewer import create_app, export_html
from searchgym.viewer.page import SCRIPTS, STYLES, static_text


@pytest.fixture(scope="module")
def client(eval_dir, train_dir, sweep_dir):
    return TestClient(create_app([eval_dir, train_dir, sweep_dir]), base_url="http://127.0.0.1")


def test_page_and_its_files_are_served_with_a_strict_content_security_policy(client):
    page = client.get("/")
    assert page.status_code == 200 and "script-src 'self'" in page.headers["content-security-policy"]
    assert "<script>" not in page.text  # no inline script: every script is a file of the package
    for name in (*STYLES, *SCRIPTS):
        assert client.get(f"/static/{name}").text == static_text(name)


def test_other_host_names_are_refused(client):
    assert client.get("/api/overview", headers={"host": "attacker.example"}).status_code == 400


def test_api_answers_the_views(client, eval_dir):
    overview = client.get("/api/overview").json()
    assert [r["kind"] for r in overview["runs"]] == ["eval", "train", "sweep"]
    assert overview["episodes"] == 12 + 24 + 12
    page = client.get("/api/episodes", params={"runs": "1", "sort": "step", "desc": "1", "limit": 5}).json()
    assert page["total"] == 24 and [r["step"] for r in page["rows"]] == [4] * 5
    summary = client.get("/api/summary", params={"runs": "0"}).json()
    assert {g["agent"] for g in summary["groups"]} == {"oracle", "heuristic"}
    assert summary["facets"]["hops"] == [1, 2, 3, 4]
    first = json.loads((eval_dir / "heuristic.jsonl").read_text().splitlines()[0])
    episode = client.get("/api/episode/0").json()
    assert episode["turns"] == first["turns"] and episode["source"] == 0
    assert client.get("/api/steps/1").json()[0]["step"] == 1


def test_bad_requests_say_how_to_fix_them(client):
    answer = client.get("/api/episodes", params={"sort": "nonsense"})
    assert answer.status_code == 400 and "sort must be one of" in answer.json()["detail"]
    assert "there is no episode 999" in client.get("/api/episode/999").json()["detail"]


def test_export_is_one_file_that_fetches_nothing_and_cannot_be_broken_out_of(
    tmp_path, eval_dir, injection_dir
):
    out = tmp_path / "viewer.html"
    done = export_html([eval_dir, injection_dir], out)
    assert (done.episodes, done.left_out) == (13, 0)
    html = out.read_text(encoding="utf-8")
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html)  # nothing from a network
    assert 'id="sg-data"' in html
    data = html.split('id="sg-data">', 1)[1].split("</script>", 1)[0]
    assert "<" not in data and json.loads(data)["rows"][12]["question"] == f"Who wrote {INJECTION}?"
    assert html.count("<script") == 1 + len(SCRIPTS)  # the data, then the viewer's own scripts
    capped = export_html([eval_dir], tmp_path / "capped.html", max_per_source=2)
    assert (capped.episodes, capped.left_out) == (4, 8)


def test_view_command_exports(tmp_path, eval_dir, capsys):
    assert main(["view", str(eval_dir), "--export", str(tmp_path / "v.html"), "--export-max", "3"]) == 0
    assert "6 episodes" in capsys.readouterr().out and (tmp_path / "v.html").is_file()
    assert main(["view", str(tmp_path / "missing")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_view_command_serves_on_loopback_and_prints_the_url(eval_dir):
    exe = Path(sys.executable).parent / "searchgym"
    proc = subprocess.Popen(
        [str(exe), "view", str(eval_dir), "--port", "0"], stdout=subprocess.PIPE, text=True
    )
    try:
        lines = [proc.stdout.readline() for _ in range(2)]
        url = lines[1].split()[2]
        assert url.startswith("http://127.0.0.1:")
        deadline = time.monotonic() + 20
        while True:
            try:
                assert httpx.get(url + "api/overview", timeout=5).json()["episodes"] == 12
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline
                time.sleep(0.1)
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_an_address_that_cannot_be_listened_on_is_one_line_not_a_thread_traceback(eval_dir, capsys):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["view", str(eval_dir), "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert f"the viewer cannot listen on 127.0.0.1:{port} (Address already in use)" in err
    assert main(["view", str(eval_dir), "--host", "no-such-host.invalid", "--port", "0"]) == 2
    assert "the viewer cannot listen on no-such-host.invalid:0" in capsys.readouterr().err
