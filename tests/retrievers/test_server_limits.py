"""The retrieval server's limits (413/422 with a message naming the flag) and its fairness: a
small request is answered while a large one is still being searched."""

from __future__ import annotations

import re
import threading
import time

import httpx
import pytest

from searchgym.errors import ConfigError
from searchgym.retrievers import BM25, Doc
from searchgym.retrievers.server import Limits, ServerThread, create_app


@pytest.fixture(scope="module")
def server(tiny_corpus_path):
    limits = Limits(max_queries=100, max_topk=50, max_results=500, max_body_bytes=20_000)
    with ServerThread(create_app(BM25.from_corpus(tiny_corpus_path), limits=limits)) as running:
        yield running


@pytest.mark.parametrize(
    ("path", "payload", "status", "message"),
    [
        (
            "/retrieve",
            {"queries": ["q"], "topk": 51},
            422,
            r"topk is 51; this server answers at most 50 \(--max-topk\)",
        ),
        ("/search", {"queries": ["q"], "k": 51}, 422, r"k is 51; .* at most 50 \(--max-topk\)"),
        (
            "/retrieve",
            {"queries": ["q"] * 101},
            413,
            r"101 queries in one request; .* at most 100 \(--max-queries\)",
        ),
        (
            "/retrieve",
            {"queries": ["q"] * 11, "topk": 50},
            413,
            r"11 queries x topk 50 = 550 results; .*--max-results",
        ),
        (
            "/search",
            {"queries": ["q" * 30_000]},
            413,
            r"larger than 20,000 bytes \(searchgym serve --max-body-mb\)",
        ),
    ],
)
def test_requests_over_a_limit_are_refused_with_the_flag_to_raise_it(server, path, payload, status, message):
    response = httpx.post(server.url + path, json=payload)
    assert response.status_code == status
    assert re.search(message, response.json()["detail"])


@pytest.mark.parametrize(
    "body", ['{"queries": ["q"], "topk": NaN}', '{"queries": ["q"], "topk": 1e400}', "[", '{"queries": "q"}']
)
def test_malformed_requests_are_422_not_500(server, body):
    response = httpx.post(
        server.url + "/retrieve", content=body, headers={"content-type": "application/json"}
    )
    assert response.status_code == 422


def test_a_request_at_the_limits_is_answered(server):
    body = httpx.post(server.url + "/retrieve", json={"queries": ["river"] * 10, "topk": 50}).json()
    assert len(body["result"]) == 10 and body["result"][0] == body["result"][9]


def test_bad_limits_are_config_errors(tiny_corpus_path):
    with pytest.raises(ConfigError, match="max_results must be a positive integer"):
        Limits(max_results=0)
    with pytest.raises(ConfigError, match=r"--topk must be between 1 and --max-topk \(5\)"):
        create_app(BM25.from_corpus(tiny_corpus_path), default_topk=6, limits=Limits(max_topk=5))


class Slow:
    """50 ms per `batch_search` call, whatever its size."""

    def __init__(self) -> None:
        self.calls = 0

    def batch_search(self, queries, k=3):
        self.calls += 1
        time.sleep(0.05)
        return [[Doc(q, "", "", 1.0)] for q in queries]

    def doc(self, doc_id):
        return None


def test_a_small_request_is_answered_while_a_heavy_one_runs():
    slow = Slow()
    with ServerThread(create_app(slow, max_batch=16)) as running:
        heavy: dict = {}

        def send_heavy() -> None:
            start = time.perf_counter()
            heavy["body"] = httpx.post(
                running.url + "/search", json={"queries": [f"q{i}" for i in range(640)]}, timeout=60
            ).json()
            heavy["s"] = time.perf_counter() - start

        thread = threading.Thread(target=send_heavy)
        thread.start()
        time.sleep(0.3)  # the heavy request is being searched, 16 queries a call
        start = time.perf_counter()
        small = httpx.post(running.url + "/search", json={"queries": ["small"]}, timeout=60).json()
        small_s = time.perf_counter() - start
        thread.join()
    assert small["results"][0][0]["id"] == "small"
    assert [r[0]["id"] for r in heavy["body"]["results"]] == [f"q{i}" for i in range(640)]
    assert heavy["s"] > 1.5 and small_s < 0.5, (heavy["s"], small_s)
