"""The retrieval server against slow, vanishing and heavy clients: half-sent requests are closed
after the read timeout, a client that hangs up costs one log line (and its queries leave the
line), and a light request is answered while the heaviest request the limits allow runs."""

from __future__ import annotations

import logging
import random
import socket
import threading
import time

import httpx
import pytest
from test_server_limits import Slow  # a retriever that takes 50 ms a batch and counts its calls

from searchgym.retrievers import BM25, Doc
from searchgym.retrievers.server import Limits, ServerThread, create_app
from searchgym.tasks.world import load_world

LOGGER = "searchgym.retrievers.server"
SERVING = "searchgym.serving"  # the hardened serving every server of searchgym runs on: the deadline
HANG_GUARD_S = 30  # a socket read that would block forever without the change fails the test instead


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def server(tiny_corpus_path):
    """A server with a 0.5 s read timeout, and every record its logger and uvicorn's log."""
    with ServerThread(create_app(BM25.from_corpus(tiny_corpus_path), read_timeout=0.5)) as running:
        records = Records()
        loggers = [logging.getLogger(name) for name in (LOGGER, SERVING, "uvicorn.error", "uvicorn")]
        for logger in loggers:  # after uvicorn configured its loggers, which would drop the handler
            logger.addHandler(records)
        running.records = records.records
        yield running
        for logger in loggers:
            logger.removeHandler(records)


def connect(url: str) -> socket.socket:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    sock = socket.create_connection((host, int(port)))
    sock.settimeout(HANG_GUARD_S)
    return sock


def read_until_closed(sock: socket.socket) -> bytes:
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def wait_for(condition, what: str) -> None:
    deadline = time.monotonic() + HANG_GUARD_S
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


HEAD = (
    b"POST /search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n"
)


def test_half_sent_headers_are_closed_after_the_read_timeout(server):
    with connect(server.url) as sock:
        sock.sendall(HEAD[:40])
        assert read_until_closed(sock) == b""
    with connect(server.url) as idle:  # connected, nothing sent: closed without a word
        assert read_until_closed(idle) == b""
    messages = [r.getMessage() for r in server.records]
    assert len(messages) == 1 and "only 40 bytes of request headers in 0.5 s (--read-timeout)" in messages[0]
    assert httpx.post(f"{server.url}/search", json={"queries": ["river"]}).status_code == 200


def test_a_half_sent_body_is_answered_408_and_closed(server):
    with connect(server.url) as sock:
        sock.sendall(HEAD + b'\r\n{"queries": ["riv')
        response = read_until_closed(sock)
    assert response.startswith(b"HTTP/1.1 408 ") and b"connection: close" in response.lower()
    assert response.endswith(b'{"detail":"the request body did not arrive within 0.5 s (--read-timeout)"}')


def test_a_client_that_hangs_up_mid_body_is_one_log_line(server):
    with connect(server.url) as sock:
        sock.sendall(HEAD + b'\r\n{"queries": ["riv')
        time.sleep(0.1)
    wait_for(lambda: server.records, "nothing was logged")
    time.sleep(0.3)  # room for a traceback, if one were coming
    [record] = server.records
    assert record.name == LOGGER and record.levelno == logging.WARNING and record.exc_info is None
    assert record.getMessage().startswith("127.0.0.1:") and "hung up while sending the body of /search" in (
        record.getMessage()
    )


def test_the_queries_of_a_client_that_hung_up_leave_the_line(caplog):
    slow = Slow()
    with ServerThread(create_app(slow, max_batch=16)) as running:
        batcher = running._server.config.app.state.batcher
        with pytest.raises(httpx.ReadTimeout):  # 640 queries, 40 calls of 50 ms: it gives up first
            httpx.post(f"{running.url}/search", json={"queries": [f"q{i}" for i in range(640)]}, timeout=0.5)
        wait_for(lambda: not batcher.waiting, "the queries of the client that hung up are still waiting")
        calls = slow.calls
        time.sleep(0.3)
        assert slow.calls <= calls + 1 < 40  # at most the call in flight when it hung up
        assert httpx.post(f"{running.url}/search", json={"queries": ["q"]}).json()["results"] == [
            [{"id": "q", "title": "", "text": "", "score": 1.0}]
        ]
    assert [r.getMessage().split(" ", 1)[1] for r in caplog.records if r.name == LOGGER] == [
        "hung up before its 640 queries were answered"
    ]


@pytest.fixture(scope="module")
def world_bm25():
    world = load_world(0, 2000)
    return BM25.build([Doc(p["id"], p["title"], p["text"]) for p in world.passages]), world


def test_a_light_request_is_answered_while_the_heaviest_allowed_one_runs(world_bm25):
    """The heaviest request: every query at the length cap, as many as allowed. A light request
    waits for about two batches of ``max_batch_chars`` characters, not for the heavy one."""
    bm25, world = world_bm25
    limits = Limits(max_queries=400, max_query_chars=2_000)
    words = " ".join(p["text"] for p in world.passages[:300]).split()
    rng = random.Random(0)
    heavy_queries = [
        " ".join(rng.choices(words, k=400))[: limits.max_query_chars] for _ in range(limits.max_queries)
    ]
    light = {"queries": [world.tasks("dev")[0].question]}
    with ServerThread(create_app(bm25, limits=limits)) as running, httpx.Client(timeout=300) as client:
        batcher = running._server.config.app.state.batcher
        alone = min(_timed(client.post, f"{running.url}/search", json=light)[1] for _ in range(3))
        heavy: dict = {}

        def send_heavy() -> None:
            heavy["response"], heavy["s"] = _timed(
                httpx.post, f"{running.url}/search", json={"queries": heavy_queries}, timeout=300
            )
            heavy["end"] = time.perf_counter()

        thread = threading.Thread(target=send_heavy)
        before = batcher.batches
        thread.start()
        wait_for(lambda: batcher.batches > before, "the heavy request never started")
        waits = []
        for _ in range(5):
            response, seconds = _timed(client.post, f"{running.url}/search", json=light)
            assert response.status_code == 200
            waits.append(seconds)
        lights_end = time.perf_counter()
        thread.join()
    assert heavy["response"].status_code == 200 and len(heavy["response"].json()["results"]) == 400
    # in theory a light request waits 2 batches of 4 heavy queries here, 8/400 of the heavy one's
    # time; with the old batcher, 2 batches of 64 (32 %)
    assert max(waits) < heavy["s"] / 5, (alone, waits, heavy["s"])
    assert heavy["end"] > lights_end, "the heavy request ended before the light ones: measured nothing"


def _timed(call, *args, **kwargs):
    start = time.perf_counter()
    result = call(*args, **kwargs)
    return result, time.perf_counter() - start
