import concurrent.futures
import os
import subprocess
import sys
import time

import httpx
import pytest
from doc_blocks import free_port

from searchgym.envs import SearchEnv
from searchgym.errors import RetrieverError
from searchgym.retrievers import BM25, Doc
from searchgym.retrievers.remote import Remote
from searchgym.retrievers.server import ServerThread, create_app
from searchgym.tasks import Task


@pytest.fixture(scope="module")
def bm25(tiny_corpus_path):
    return BM25.from_corpus(tiny_corpus_path)


@pytest.fixture(scope="module")
def server(bm25):
    with ServerThread(create_app(bm25)) as running:
        yield running


def test_retrieve_answers_search_r1_shape_exactly(server, bm25):
    payload = {"queries": ["capital of France", "Zürich lake"], "topk": 2, "return_scores": True}
    body = httpx.post(f"{server.url}/retrieve", json=payload).json()
    assert list(body) == ["result"] and len(body["result"]) == 2
    first = body["result"][0][0]
    assert set(first) == {"document", "score"} and set(first["document"]) == {"id", "contents"}
    assert first["document"] == {"id": "d1", "contents": f'"Paris"\n{bm25.doc("d1").text}'}
    assert first["score"] == pytest.approx(bm25.search("capital of France", 2)[0].score)
    bare = httpx.post(f"{server.url}/retrieve", json={"queries": ["Zürich lake"]}).json()
    assert bare == {"result": [[{"id": "d5", "contents": f'"Zürich"\n{bm25.doc("d5").text}'}]]}


def test_our_endpoints(server, bm25):
    body = httpx.post(f"{server.url}/search", json={"queries": ["river"], "k": 3}).json()
    assert [Doc(**d) for d in body["results"][0]] == bm25.search("river", 3)
    assert httpx.get(f"{server.url}/health").json() == {"status": "ok", "retriever": "BM25", "n_docs": 8}
    assert httpx.get(f"{server.url}/doc/d6").json()["title"] == "Marie Curie"
    assert httpx.get(f"{server.url}/doc/nope").status_code == 404
    assert httpx.post(f"{server.url}/search", json={"queries": ["x"], "k": 0}).status_code == 422


def test_remote_equals_local(server, bm25):
    with Remote(server.url) as remote:
        queries = ["capital of France", "largest city", "", "日本語", "Zürich"]
        assert remote.batch_search(queries, 3) == bm25.batch_search(queries, 3)
        assert remote.search("river", 2) == bm25.search("river", 2)
        assert remote.doc("d6") == bm25.doc("d6") and remote.doc("nope") is None


@pytest.mark.parametrize("host", ["x", "attacker.example:8000", "127.0.0.1.nip.io", ""])
def test_a_foreign_host_is_refused(server, host):
    """A web page that rebinds its own name to 127.0.0.1 sends its name as Host."""
    for response in (
        httpx.post(f"{server.url}/retrieve", json={"queries": ["river"]}, headers={"Host": host}),
        httpx.get(f"{server.url}/doc/d6", headers={"Host": host}),
    ):
        assert response.status_code == 400
        assert "--allowed-hosts" in response.json()["detail"]


def test_loopback_and_allowed_hosts_are_answered(server, bm25):
    port = server.url.rsplit(":", 1)[1]
    for host in ("127.0.0.1", f"127.0.0.1:{port}", f"localhost:{port}", "LOCALHOST", f"[::1]:{port}"):
        assert httpx.get(f"{server.url}/health", headers={"Host": host}).status_code == 200, host
    with ServerThread(create_app(bm25, allowed_hosts=["retriever.internal"])) as named:
        headers = {"Host": "retriever.internal:8000"}
        assert (
            httpx.post(f"{named.url}/search", json={"queries": ["river"]}, headers=headers).status_code == 200
        )
        assert httpx.get(f"{named.url}/health", headers={"Host": "other.internal"}).status_code == 400
    with ServerThread(create_app(bm25, allowed_hosts=["*"])) as anyone:
        assert httpx.get(f"{anyone.url}/health", headers={"Host": "other.internal"}).status_code == 200


@pytest.mark.parametrize(
    ("kwargs", "media_type"),
    [
        ({"content": b'{"queries": ["river"]}', "headers": {"Content-Type": "text/plain"}}, "text/plain"),
        ({"data": {"queries": "river"}}, "application/x-www-form-urlencoded"),
        ({"content": b'{"queries": ["river"]}'}, "none"),
    ],
)
def test_only_json_bodies_are_read(server, kwargs, media_type):
    """A cross-site form or text/plain post needs no CORS preflight: it must not be answered."""
    for path in ("/retrieve", "/search"):
        response = httpx.post(server.url + path, **kwargs)
        assert response.status_code == 415
        assert f"Content-Type: application/json, not '{media_type}'" in response.json()["detail"]
    charset = {"Content-Type": "application/json; charset=utf-8"}
    ok = httpx.post(f"{server.url}/search", content=b'{"queries": ["river"]}', headers=charset)
    assert ok.status_code == 200


def test_a_query_longer_than_the_cap_is_refused(server):
    longest = "river " * 333 + "xy"  # 2,000 characters, the default cap
    assert httpx.post(f"{server.url}/search", json={"queries": ["lake", longest]}).status_code == 200
    response = httpx.post(f"{server.url}/retrieve", json={"queries": ["lake", longest + "z"]})
    assert response.status_code == 413
    assert response.json()["detail"] == (
        "query 1 is 2,001 characters long; this server takes at most 2,000 (--max-query-chars): shorten it"
    )
    one_megabyte = httpx.post(f"{server.url}/retrieve", json={"queries": ["river " * 174_763]})
    assert one_megabyte.status_code == 413 and "--max-query-chars" in one_megabyte.json()["detail"]


def test_concurrent_requests_are_batched(server):
    batcher = server._server.config.app.state.batcher
    before = batcher.batches
    with Remote(server.url) as remote, concurrent.futures.ThreadPoolExecutor(16) as pool:
        results = list(pool.map(lambda i: remote.search(f"capital city {i}", 2), range(64)))
    assert all(r and r[0].id in {"d1", "d3", "d7", "d5", "d2"} for r in results)
    assert batcher.batches - before < 64


def test_dead_server_raises_retriever_error_after_retries():
    remote = Remote(f"http://127.0.0.1:{free_port()}", timeout=1, retries=2, backoff=0.01)
    with pytest.raises(RetrieverError, match=r"failed after 3 attempt\(s\): could not connect"):
        remote.search("anything")


class Slow:
    def batch_search(self, queries, k=3):
        time.sleep(1.0)
        return [[] for _ in queries]

    def doc(self, doc_id):
        return None


def test_timeout_raises_retriever_error():
    with ServerThread(create_app(Slow())) as slow:
        remote = Remote(slow.url, timeout=0.2, retries=1, backoff=0.01)
        with pytest.raises(RetrieverError, match="timed out"):
            remote.search("q")


def test_dead_server_is_an_observation_in_an_episode():
    task = Task("t", "What is the capital of France?", ("Paris",))
    env = SearchEnv([task], Remote(f"http://127.0.0.1:{free_port()}", timeout=1, retries=0))
    env.reset(options={"task": task})
    obs, reward, terminated, truncated, info = env.step("<search>capital of France</search>")
    assert "Search failed" in obs and "could not connect" in obs
    assert not terminated and info["n_errors"] == 1
    _, reward, terminated, _, _ = env.step("<answer>Paris</answer>")
    assert terminated and reward == 1.0


@pytest.mark.slow
def test_searchgym_serve_cli(bm25, tmp_path):
    bm25.save(tmp_path / "idx")
    port = free_port()
    exe = os.path.join(os.path.dirname(sys.executable), "searchgym")
    proc = subprocess.Popen([exe, "serve", "--index", str(tmp_path / "idx"), "--port", str(port)])
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with Remote(f"http://127.0.0.1:{port}", retries=0) as remote:
                    assert remote.health()["n_docs"] == 8
                    assert remote.search("capital of France", 1)[0].id == "d1"
                break
            except RetrieverError:
                assert time.monotonic() < deadline and proc.poll() is None, "server did not come up"
                time.sleep(0.2)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
