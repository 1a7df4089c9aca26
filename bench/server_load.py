"""Load test of the retrieval server on loopback: N concurrent clients for a fixed time.

    python bench/server_load.py                   # 16 clients, 30 s, BM25 over a 10k-passage world
    python bench/server_load.py --clients 4 --seconds 5 --passages 2000
    python bench/server_load.py --heavy --passages 50000 --seconds 30

Reports failed requests, p50/p99 latency and throughput, and the throughput as a ratio of the
same queries answered in-process by `BM25.batch_search` (the peer: no HTTP at all).

With ``--heavy``, one client sends the heaviest request the server's limits allow (queries of
``--query-chars``, the length cap, as many as fit) and gives up after ``--seconds``; another sends
one question every 0.1 s meanwhile. Reports the light request's latency alone and during the
heavy one: how long a small request waits behind the largest.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import threading
import time

import httpx
import numpy as np

from searchgym.retrievers import BM25, Doc
from searchgym.retrievers.remote import Remote
from searchgym.retrievers.server import Limits, ServerThread, create_app
from searchgym.tasks.world import load_world


def client(url: str, queries: list[str], stop_at: float, latencies: list[float], errors: list[str]) -> None:
    with Remote(url, timeout=10, retries=0) as remote:
        i = 0
        while time.perf_counter() < stop_at:  # bounded by time: the test stops by itself
            start = time.perf_counter()
            try:
                remote.search(queries[i % len(queries)], 3)
            except Exception as e:  # counted, reported: a load test must not stop at the first
                errors.append(repr(e))
            latencies.append(time.perf_counter() - start)
            i += 1


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--passages", type=int, default=10_000)
    parser.add_argument("--heavy", action="store_true", help="a light client beside the heaviest request")
    parser.add_argument("--query-chars", type=int, default=None, help="with --heavy (default: the cap)")
    args = parser.parse_args()

    world = load_world(0, args.passages)
    bm25 = BM25.build(Doc(p["id"], p["title"], p["text"]) for p in world.passages)
    queries = [t.question for t in world.tasks("test")]
    if args.heavy:
        heavy(bm25, world, queries, args)
        return

    start = time.perf_counter()
    bm25.batch_search(queries, 3)
    peer_qps = len(queries) / (time.perf_counter() - start)

    latencies: list[float] = []
    errors: list[str] = []
    with ServerThread(create_app(bm25)) as server:
        stop_at = time.perf_counter() + args.seconds
        threads = [
            threading.Thread(
                target=client, args=(server.url, queries[i :: args.clients], stop_at, latencies, errors)
            )
            for i in range(args.clients)
        ]
        start = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - start

    ms = np.array(latencies) * 1000
    qps = len(latencies) / elapsed
    print(f"{args.clients} clients x {args.seconds:.0f} s, BM25 over {len(world.passages):,} passages")
    print(f"requests {len(latencies):,}  failed {len(errors)}  throughput {qps:,.0f} req/s")
    p50, p99 = np.percentile(ms, [50, 99])
    print(f"latency p50 {p50:.1f} ms  p99 {p99:.1f} ms  max {ms.max():.1f} ms")
    print(f"server / in-process batch_search throughput: {qps / peer_qps:.2f} (peer {peer_qps:,.0f} q/s)")
    if errors:
        print("first error:", errors[0])


def heavy(bm25: BM25, world, queries: list[str], args: argparse.Namespace) -> None:
    limits = Limits()
    chars = args.query_chars or limits.max_query_chars
    words = " ".join(p["text"] for p in world.passages[:1000]).split()
    rng = np.random.default_rng(0)
    fits = min(limits.max_queries, limits.max_results // 3, limits.max_body_bytes // (chars + 8))
    big = [" ".join(rng.choice(words, chars // 4))[:chars] for _ in range(fits)]
    with ServerThread(create_app(bm25)) as server, Remote(server.url, timeout=600, retries=0) as light:
        light.search(queries[0], 3)  # compiles the search kernel
        alone = []
        for q in queries[:20]:
            start = time.perf_counter()
            light.search(q, 3)
            alone.append(time.perf_counter() - start)

        def send() -> None:
            with contextlib.suppress(httpx.TimeoutException):  # it gives up: the server drops it
                httpx.post(f"{server.url}/search", json={"queries": big}, timeout=args.seconds)

        thread = threading.Thread(target=send)
        thread.start()
        time.sleep(1.0)  # the heavy body is sent and parsed
        during, stop_at = [], time.perf_counter() + args.seconds - 1.0
        for q in itertools.cycle(queries):
            if time.perf_counter() >= stop_at:
                break
            start = time.perf_counter()
            light.search(q, 3)
            during.append(time.perf_counter() - start)
            time.sleep(0.1)
        thread.join()
    a, d = np.array(alone) * 1000, np.array(during) * 1000
    print(
        f"BM25 over {len(world.passages):,} passages; heavy request: {fits:,} queries of {chars:,} characters"
    )
    print(f"light request alone:        p50 {np.median(a):.1f} ms  max {a.max():.1f} ms  ({len(a)})")
    p50, p99 = np.percentile(d, [50, 99])
    print(f"light during heavy request: p50 {p50:.1f} ms  p99 {p99:.1f} ms  max {d.max():.1f} ms  ({len(d)})")


if __name__ == "__main__":
    main()
