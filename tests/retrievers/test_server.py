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
