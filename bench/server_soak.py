"""Soak test of the retrieval server on loopback: 16 clients send valid and invalid requests for
10 minutes; valid ones must all succeed, invalid ones must all be refused (4xx), and memory must
stay flat.

    python bench/server_soak.py                       # 16 clients, 600 s, BM25 over a 10k-passage world
    python bench/server_soak.py --seconds 30 --passages 2000

Invalid requests: over each limit (queries, topk, queries x topk, body size), topk NaN or 0,
malformed JSON, wrong types. Prints requests per kind, failures (a valid request not answered
200, an invalid one answered other than 413/422), p50/p99 latency of valid requests, and the
process's RSS after warm-up and at the end (server and clients share the process). Only
127.0.0.1 is used. Memory is sampled every 5 s after a warm-up with every client running; flat
memory means the second half of the soak adds nothing.
"""

from __future__ import annotations

import argparse
import random
import threading
import time
from collections import Counter

import httpx
import numpy as np

from searchgym.retrievers import BM25, Doc
from searchgym.retrievers.server import Limits, ServerThread, create_app
from searchgym.tasks.world import load_world

LIMITS = Limits(max_queries=256, max_topk=100, max_results=2_000, max_body_bytes=1 << 20)


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        kb = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    return kb / 1024


def valid(rng: random.Random, queries: list[str]) -> tuple[str, dict]:
    batch = rng.sample(queries, rng.choice([1, 1, 4, 16]))
    if rng.random() < 0.5:
        return "/retrieve", {"queries": batch, "topk": rng.choice([1, 3, 10]), "return_scores": True}
    return "/search", {"queries": batch, "k": rng.choice([1, 3, 10])}


def invalid(rng: random.Random) -> tuple[str, dict | bytes]:
    return rng.choice(
        [
            ("/retrieve", {"queries": ["q"] * (LIMITS.max_queries + 1)}),
            ("/retrieve", {"queries": ["q"], "topk": LIMITS.max_topk + 1}),
            ("/search", {"queries": ["q"] * 100, "k": 50}),
            ("/search", {"queries": ["x" * (LIMITS.max_body_bytes + 1)]}),
            ("/retrieve", b'{"queries": ["q"], "topk": NaN}'),
            ("/retrieve", {"queries": ["q"], "topk": 0}),
            ("/search", b'{"queries": ["q"'),
            ("/search", {"queries": "not a list"}),
            ("/retrieve", {"queries": [1, 2]}),
        ]
    )


def client(url, seed, queries, stop_at, counts, failures, latencies, lock) -> None:
    rng = random.Random(seed)
    with httpx.Client(base_url=url, timeout=60) as http:
        while time.perf_counter() < stop_at:
            good = rng.random() < 0.7
            path, body = valid(rng, queries) if good else invalid(rng)
            start = time.perf_counter()
            try:
                if isinstance(body, bytes):
                    response = http.post(path, content=body, headers={"content-type": "application/json"})
                else:
                    response = http.post(path, json=body)
                status = response.status_code
            except httpx.HTTPError as e:  # counted: the soak must not stop at the first
                status = type(e).__name__
            took = time.perf_counter() - start
            ok = status == 200 if good else status in (413, 422)
            with lock:
                counts["valid" if good else "invalid"] += 1
                if not ok:
                    failures[f"{'valid' if good else 'invalid'} {path}: {status}"] += 1
                if good:
                    latencies.append(took)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=600.0, help="how long to soak (default 10 minutes)")
    parser.add_argument("--passages", type=int, default=10_000)
    args = parser.parse_args()
    world = load_world(seed=0, n_passages=args.passages)
    bm25 = BM25.build([Doc(p["id"], p["title"], p["text"]) for p in world.passages])
    queries = [t.question for t in world.tasks("dev")]
    counts: Counter[str] = Counter()
    failures: Counter[str] = Counter()
    latencies: list[float] = []
    lock = threading.Lock()
    samples: list[tuple[float, float]] = []  # (seconds into the soak, RSS MB)
    with ServerThread(create_app(bm25, limits=LIMITS), host="127.0.0.1") as server:
        # all clients run through the warm-up too, so the baseline already holds their threads,
        # buffers and the allocator's arenas; only what the measured part adds counts
        warm = min(60.0, args.seconds / 5)
        start = time.perf_counter()
        stop_at = start + warm + args.seconds
        threads = [
            threading.Thread(
                target=client, args=(server.url, i, queries, stop_at, counts, failures, latencies, lock)
            )
            for i in range(args.clients)
        ]
        for t in threads:
            t.start()
        while (now := time.perf_counter()) < stop_at:
            if now - start >= warm:
                samples.append((now - start - warm, rss_mb()))
            time.sleep(min(5.0, max(stop_at - now, 0.01)))
        for t in threads:
            t.join()
        samples.append((args.seconds, rss_mb()))
    p50, p99 = np.percentile(latencies, [50, 99]) * 1000 if latencies else (float("nan"),) * 2
    print(f"{args.clients} clients for {args.seconds:.0f} s on {server.url} ({len(bm25):,} passages)")
    print(f"requests: {counts['valid']:,} valid, {counts['invalid']:,} invalid")
    on_valid = sum(n for line, n in failures.items() if line.startswith("valid"))
    print(f"failures: {sum(failures.values())} ({on_valid} on valid requests)")
    for line, n in failures.most_common():
        print(f"  {n:>7}  {line}")
    print(f"valid latency: p50 {p50:.1f} ms, p99 {p99:.1f} ms")
    half = [mb for t, mb in samples if t >= args.seconds / 2]
    print(
        f"RSS: {samples[0][1]:.0f} MB after {warm:.0f} s of warm-up, {half[0]:.0f} MB at half time, "
        f"{samples[-1][1]:.0f} MB at the end; second half {half[-1] - half[0]:+.0f} MB "
        f"(max {max(mb for _, mb in samples):.0f} MB)"
    )


if __name__ == "__main__":
    main()
