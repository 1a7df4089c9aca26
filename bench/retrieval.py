"""Retrieval speed and quality against the peers, on real and on large text, in one run.

    python bench/retrieval.py                  # mini-Wikipedia + 1M generated passages (~30 min, 2 cores)
    python bench/retrieval.py --quick          # small corpora, a minute or two
    python bench/retrieval.py --corpora miniwiki --parts bm25

BM25, on each corpus: searchgym's `BM25` (bm25s's index format, searched by its numba kernel),
searchgym's `Lucene` (pyserini 0.25, the peer: Search-R1's BM25) and rank_bm25 (the slow
reference; not a project dependency: ``pip install rank_bm25``, skipped with a message if
missing). Each build runs in a fresh process, so its peak RSS (corpus in memory included) is its
own; the same process then times ``search(q, 10)`` in a loop (single) and one
``batch_search(queries, 10)`` on --threads threads (batched). ``index MB`` is what search reads
(bm25s's score matrix and vocabulary; Lucene's files less its stored documents), ``disk MB`` the
whole saved folder, documents included. ``agree@10`` is the mean share of pyserini's top 10 that
a backend also returns, over queries where both return 10. rank_bm25 is given the same terms (our
Lucene analyzer) and, on a large corpus, only the first ``2e7 / corpus size`` queries.

Corpora and queries:
- mini-Wikipedia: 10,033 Wikipedia lead paragraphs (``python data_scripts/fetch_miniwiki.py``
  writes them). Queries are known-item searches: for 1,000 paragraphs drawn at random (seed 0),
  one sentence other than the first (the first if it is the only one), with the words of the
  paragraph's title taken out, cut to 12 words.
- generated: --world-passages passages of `searchgym.tasks.world` (worlds of at most 500,000
  passages with seeds 0, 1, ... side by side), cached under --work-dir; queries are the worlds'
  test questions, shuffled (seed 0).

Dense (with the generated corpus, one vector per passage): encoding 1M passages with MiniLM takes
hours here, so the vectors are sampled from a model fitted to real all-MiniLM-L6-v2 embeddings of
--fit-passages mini-Wikipedia paragraphs (k-means centres, one per 4 paragraphs, plus one
full-covariance Gaussian for the residuals scaled so that the sample's nearest-neighbour cosine
matches the real one; rows normalised; queries are drawn from it too). The encoder's passages/s on those
paragraphs is reported. Indexes are built by searchgym's `dense._build_index`: Flat (exact),
HNSW (M 32, --ef-construction) with an efSearch sweep (the row shows the smallest efSearch with
recall@10 >= 0.98 against Flat, or the best), IVF-PQ (searchgym's defaults) with an nprobe sweep
(the row shows the best recall). ``x Flat`` is batched q/s over Flat's.

Tables are printed and written, with the sweeps, to --out/retrieval.json, plus
--out/dense_sweep.png (recall@10 against q/s). Timings are wall clock on a shared machine: read
the ratios within one run.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import random
import re
import resource
import shutil
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from searchgym.retrievers import BM25, Doc, read_corpus, write_corpus
from searchgym.tasks.datasets import default_data_dir
from searchgym.tasks.world import WorldConfig, generate_world
from searchgym.tasks.world.config import MAX_PASSAGES

K = 10
REPEATS = 3  # timings are medians of this many passes (rank_bm25: one)
BACKENDS = ("searchgym BM25", "pyserini", "rank_bm25")
FETCH_MINIWIKI = "python data_scripts/fetch_miniwiki.py"


# ---------------------------------------------------------------- corpora and queries


def world_corpus(n_passages: int, work_dir: Path) -> tuple[Path, list[str]]:
    """The generated corpus of ``n_passages`` passages and its test questions, cached."""
    folder = work_dir / f"world-{n_passages}"
    corpus, questions = folder / "corpus.jsonl", folder / "questions.json"
    if not (corpus.is_file() and questions.is_file()):
        parts = math.ceil(n_passages / MAX_PASSAGES)
        asked: list[str] = []

        def passages():
            for seed in range(parts):
                print(f"  generating world {seed + 1}/{parts} ({n_passages // parts:,} passages)", flush=True)
                config = WorldConfig(seed=seed, n_passages=n_passages // parts, train_per_hop=0)
                world = generate_world(config)
                asked.extend(t.question for t in world.tasks("test"))
                yield from (Doc(p["id"], p["title"], p["text"]) for p in world.passages)

        write_corpus(passages(), corpus)
        questions.write_text(json.dumps(asked), encoding="utf-8")
    asked = json.loads(questions.read_text(encoding="utf-8"))
    random.Random(0).shuffle(asked)
    return corpus, asked


def wiki_queries(docs: list[Doc], n: int, seed: int = 0) -> list[str]:
    """Known-item queries: a sentence of a random paragraph (not its first, unless it has one
    only) without the words of the paragraph's title, cut to 12 words."""
    rng = random.Random(seed)
    queries = []
    for doc in rng.sample(docs, min(n, len(docs))):
        sentences = [s for s in re.split(r"(?<=[.!?])\s+", doc.text) if s.strip()] or [doc.title]
        sentence = rng.choice(sentences[1:] or sentences)
        title = {w.lower() for w in re.findall(r"\w+", doc.title)}
        words = [w for w in sentence.split() if re.sub(r"\W", "", w).lower() not in title]
        queries.append(" ".join(words[:12]) or doc.title)
    return queries


# ---------------------------------------------------------------- BM25 backends (one process each)


def _folder_mb(path: Path, skip=lambda p: False) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not skip(p)) / 2**20


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def measure_bm25(
    backend: str, corpus: str, queries: list[str], n_single: int, threads: int, out: str
) -> dict:
    """Build one backend on ``corpus``, save it to ``out``, time its searches; runs in a fresh
    process (its peak RSS is the build's: searching allocates little)."""
    out_dir = Path(out)
    shutil.rmtree(out_dir, ignore_errors=True)
    row: dict = {"backend": backend}
    start = time.perf_counter()
    if backend == "searchgym BM25":
        index = BM25.build(read_corpus(corpus))
        row["build_s"], row["build_rss_mb"] = time.perf_counter() - start, _peak_rss_mb()
        index.save(out_dir)
        row["index_mb"] = _folder_mb(out_dir / "bm25s")
        index.n_threads = threads

        def batch(qs):
            return index.batch_search(qs, K)

    elif backend == "pyserini":
        from searchgym.retrievers.lucene import Lucene

        index = Lucene.build(read_corpus(corpus), threads=threads)
        row["build_s"], row["build_rss_mb"] = time.perf_counter() - start, _peak_rss_mb()
        index.save(out_dir)
        row["index_mb"] = _folder_mb(out_dir, skip=lambda p: p.suffix in (".fdt", ".fdx", ".fdm"))

        def batch(qs):
            return index.batch_search(qs, K, threads=threads)

    else:
        return _measure_rank_bm25(row, corpus, queries[:n_single], start)
    row["disk_mb"] = _folder_mb(out_dir)
    for q in queries[:200]:  # warm up: compiled code, the JVM's JIT, caches
        index.search(q, K)
    singles, batches = [], []
    for _ in range(REPEATS):
        start = time.perf_counter()
        for q in queries[:n_single]:
            index.search(q, K)
        singles.append(n_single / (time.perf_counter() - start))
        start = time.perf_counter()
        found = batch(queries)
        batches.append(len(queries) / (time.perf_counter() - start))
    row["single_qps"], row["batch_qps"] = float(np.median(singles)), float(np.median(batches))
    row["top10"] = [[d.id for d in docs] for docs in found]
    row["n_single"] = n_single
    index.close()
    return row


def _measure_rank_bm25(row: dict, corpus: str, queries: list[str], start: float) -> dict:
    from rank_bm25 import BM25Okapi

    from searchgym.retrievers.analysis import LuceneAnalyzer

    analyzer, vocab = LuceneAnalyzer(), {}
    docs = list(read_corpus(corpus))
    terms = list(analyzer.corpus_terms((f"{d.title}\n{d.text}" for d in docs), vocab))
    index = BM25Okapi(terms, k1=0.9, b=0.4)
    row["build_s"], row["build_rss_mb"] = time.perf_counter() - start, _peak_rss_mb()
    top10 = []
    start = time.perf_counter()
    for q in queries:
        scores = index.get_scores([vocab[t] for t in analyzer(q) if t in vocab])
        best = np.lexsort((np.arange(len(scores)), -scores))[:K]
        top10.append([docs[i].id for i in best if scores[i] > 0])
    row["single_qps"] = len(queries) / (time.perf_counter() - start)
    row["top10"], row["n_single"] = top10, len(queries)
    return row


def in_fresh_process(fn, *args):
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(fn, *args).result()


def agreement(ours: list[list[str]], peer: list[list[str]]) -> float | None:
    pairs = [(a, b) for a, b in zip(ours, peer) if len(a) == K and len(b) == K]
    return sum(len(set(a) & set(b)) / K for a, b in pairs) / len(pairs) if pairs else None


def bench_bm25(corpus: Path, queries: list[str], args, name: str) -> list[dict]:
    n_docs = sum(1 for _ in corpus.open(encoding="utf-8"))
    rows = []
    for backend in BACKENDS:
        missing = _missing(backend)
        if missing:
            print(f"  {backend}: skipped, {missing}", flush=True)
            rows.append({"backend": backend, "skipped": missing})
            continue
        n_single = len(queries)
        if backend == "rank_bm25":
            n_single = max(5, min(len(queries), int(2e7 // n_docs)))
        print(f"  {backend}: building and searching ...", flush=True)
        out = args.work_dir / f"index-{name}-{backend.replace(' ', '-')}"
        rows.append(
            in_fresh_process(measure_bm25, backend, str(corpus), queries, n_single, args.threads, str(out))
        )
        shutil.rmtree(out, ignore_errors=True)
    peer = next((r for r in rows if r["backend"] == "pyserini" and "skipped" not in r), None)
    peer_top10 = peer["top10"] if peer is not None else None
    for row in rows:
        if "skipped" in row:
            continue
        if peer is not None:
            row["agree10"] = agreement(row["top10"], peer_top10)
            if "batch_qps" in row:
                row["batch_vs_pyserini"] = row["batch_qps"] / peer["batch_qps"]
            row["single_vs_pyserini"] = row["single_qps"] / peer["single_qps"]
        row.pop("top10")
    return rows


def _missing(backend: str) -> str | None:
    try:
        if backend == "rank_bm25":
            import rank_bm25  # noqa: F401
        elif backend == "pyserini":
            import pyserini  # noqa: F401
    except ImportError:
        return "not installed: pip install rank_bm25" if backend == "rank_bm25" else (
            'not installed: pip install "searchgym[lucene]" (and a JDK 17)')  # fmt: skip
    return None


# ---------------------------------------------------------------- dense


def fit_embeddings(real: np.ndarray, seed: int = 0):
    """k-means centres (one per 4 vectors) plus one full-covariance Gaussian for the residuals,
    its scale set (bisection) so that a sample as large as ``real`` has the same mean cosine to
    the nearest neighbour: the residuals alone would make the sample more spread than the data."""
    import faiss

    n, dim = real.shape
    n_clusters = max(2, n // 4)
    kmeans = faiss.Kmeans(dim, n_clusters, niter=25, seed=seed, spherical=True, min_points_per_centroid=1)
    kmeans.train(real)
    _, assign = kmeans.index.search(real, 1)
    assign = assign[:, 0]
    weights = np.bincount(assign, minlength=n_clusters).astype(np.float64)
    centres = np.zeros((n_clusters, dim))
    np.add.at(centres, assign, real)
    centres /= np.maximum(weights, 1)[:, None]
    residuals = real - centres[assign]
    cov = residuals.T @ residuals / max(1, n - n_clusters)
    chol = np.linalg.cholesky(cov + 1e-6 * np.eye(dim))
    model = [centres.astype(np.float32), chol.astype(np.float32), weights / weights.sum()]
    target, low, high = neighbour_cosine(real), 0.2, 1.5
    for _ in range(12):  # a larger scale spreads the sample: its neighbours get further
        scale = (low + high) / 2
        model[1] = (chol * scale).astype(np.float32)
        low, high = (
            (scale, high)
            if neighbour_cosine(sample_embeddings(model, n, seed + 7)) > target
            else (low, scale)
        )
    model[1] = (chol * (low + high) / 2).astype(np.float32)
    return model


def sample_embeddings(model, n: int, seed: int) -> np.ndarray:
    centres, chol, weights = model
    rng = np.random.default_rng(seed)
    out = np.empty((n, centres.shape[1]), dtype=np.float32)
    for lo in range(0, n, 100_000):
        hi = min(n, lo + 100_000)
        z = rng.standard_normal((hi - lo, centres.shape[1]), dtype=np.float32)
        out[lo:hi] = centres[rng.choice(len(weights), size=hi - lo, p=weights)] + z @ chol.T
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    return out


def neighbour_cosine(x: np.ndarray) -> float:
    """Mean cosine of each vector to its nearest other vector."""
    sims = x @ x.T
    np.fill_diagonal(sims, -1)
    return float(sims.max(axis=1).mean())


def bench_dense(texts: list[str], fit_corpus: str, n_vectors: int, n_queries: int, args) -> dict:
    import faiss

    from searchgym.retrievers.dense import _build_index
    from searchgym.retrievers.encoders import DEFAULT_ENCODER, Encoder

    faiss.omp_set_num_threads(args.threads)
    encoder = Encoder(DEFAULT_ENCODER, device="cpu")
    encoder.encode_passages(texts[:8])  # warm up
    start = time.perf_counter()
    real = encoder.encode_passages(texts, batch_size=32, show_progress=not args.no_progress)
    result = {
        "encoder": DEFAULT_ENCODER,
        "encoder_passages_per_s": len(texts) / (time.perf_counter() - start),
    }
    model = fit_embeddings(real)
    vectors = sample_embeddings(model, n_vectors, seed=1)
    queries = sample_embeddings(model, n_queries, seed=2)
    result["neighbour_cosine"] = {
        "real": neighbour_cosine(real),
        "sampled": neighbour_cosine(vectors[: len(real)]),
    }
    result["n_vectors"], result["fit_passages"], result["fit_corpus"] = n_vectors, len(texts), fit_corpus

    def timed_search(index):
        start = time.perf_counter()
        _, ids = index.search(queries, K)
        return ids, len(queries) / (time.perf_counter() - start)

    def size_mb(index):
        path = args.work_dir / "dense.faiss"
        faiss.write_index(index, str(path))
        size = path.stat().st_size / 2**20
        path.unlink()
        return size

    rows, sweeps = [], {}
    start = time.perf_counter()
    flat = _build_index(vectors, "flat", {})
    flat_build = time.perf_counter() - start
    truth, flat_qps = timed_search(flat)
    rows.append({"index": "Flat", "setting": "exact", "build_s": flat_build, "size_mb": size_mb(flat),
                 "batch_qps": flat_qps, "recall10": 1.0})  # fmt: skip
    del flat

    def recall(ids):
        return float(np.mean([len(set(a) & set(b)) / K for a, b in zip(ids, truth)]))

    for kind, params, knob, values in (
        ("hnsw", {"M": 32, "ef_construction": args.ef_construction, "ef_search": 16}, "efSearch",
         args.ef_search),
        ("ivfpq", {"nlist": None, "m": None, "nbits": 8, "nprobe": 1, "train_size": 100_000, "seed": 0},
         "nprobe", args.nprobe),
    ):  # fmt: skip
        print(f"  dense: building {kind} on {n_vectors:,} vectors ...", flush=True)
        start = time.perf_counter()
        index = _build_index(vectors, kind, params)
        build_s, size = time.perf_counter() - start, size_mb(index)
        sweep = []
        for value in values:
            if kind == "hnsw":
                index.hnsw.efSearch = value
            else:
                index.nprobe = value
            ids, qps = timed_search(index)
            sweep.append({knob: value, "recall10": recall(ids), "batch_qps": qps})
        reaching = [p for p in sweep if p["recall10"] >= 0.98]
        best = reaching[0] if kind == "hnsw" and reaching else max(sweep, key=lambda p: p["recall10"])
        name = "HNSW" if kind == "hnsw" else "IVF-PQ"
        rows.append({"index": name, "setting": f"{knob} {best[knob]}", "build_s": build_s, "size_mb": size,
                     "batch_qps": best["batch_qps"], "recall10": best["recall10"]})  # fmt: skip
        sweeps[name] = sweep
        del index
    for row in rows:
        row["x_flat"] = row["batch_qps"] / flat_qps
    result["rows"], result["sweeps"], result["flat_qps"] = rows, sweeps, flat_qps
    return result


# ---------------------------------------------------------------- output


BM25_COLUMNS = [
    ("backend", "{}", 15), ("build_s", "{:.1f}", 8), ("index_mb", "{:.0f}", 9), ("disk_mb", "{:.0f}", 8),
    ("build_rss_mb", "{:.0f}", 13), ("single_qps", "{:,.0f}", 11), ("batch_qps", "{:,.0f}", 10),
    ("single_vs_pyserini", "{:.2f}", 19), ("batch_vs_pyserini", "{:.2f}", 18), ("agree10", "{:.3f}", 8),
]  # fmt: skip
DENSE_COLUMNS = [
    ("index", "{}", 7), ("setting", "{}", 13), ("build_s", "{:.1f}", 8), ("size_mb", "{:.0f}", 8),
    ("batch_qps", "{:,.0f}", 10), ("x_flat", "{:.1f}", 7), ("recall10", "{:.3f}", 9),
]  # fmt: skip


def format_table(rows: list[dict], columns) -> list[str]:
    lines = ["  ".join(name.rjust(width) for name, _, width in columns)]
    for row in rows:
        if "skipped" in row:
            lines.append(f"{row['backend'].rjust(columns[0][2])}  skipped: {row['skipped']}")
            continue
        cells = [fmt.format(row[name]) if row.get(name) is not None else "-" for name, fmt, _ in columns]
        lines.append("  ".join(cell.rjust(width) for cell, (_, _, width) in zip(cells, columns)))
    return lines


def print_corpus(name: str, result: dict) -> None:
    print(f"\n== {name}: {result['passages']:,} passages, {result['queries']:,} queries, top {K}, "
          f"{result['threads']} threads for batches ==")  # fmt: skip
    print("\n".join(format_table(result["bm25"], BM25_COLUMNS)))
    notes = [f"{r['backend']}: single over {r['n_single']:,} queries" for r in result["bm25"]
             if r.get("n_single") and r["n_single"] < result["queries"]]  # fmt: skip
    if notes:
        print("  (" + "; ".join(notes) + ", no batch API)")
    dense = result.get("dense")
    if dense:
        cos = dense["neighbour_cosine"]
        print(f"\n  dense: {dense['n_vectors']:,} x 384 vectors sampled from a model of "
              f"{dense['fit_passages']:,} real MiniLM embeddings (nearest-neighbour cosine: real "
              f"{cos['real']:.3f}, sampled {cos['sampled']:.3f}); {dense['encoder']} encodes "
              f"{dense['encoder_passages_per_s']:.1f} passages/s on {dense['fit_corpus']}")  # fmt: skip
        print("\n".join(format_table(dense["rows"], DENSE_COLUMNS)))
        for name_, sweep in dense["sweeps"].items():
            knob = next(key for key in sweep[0] if key not in ("recall10", "batch_qps"))
            points = ", ".join(f"{p[knob]}: {p['recall10']:.3f} @ {p['batch_qps']:,.0f} q/s" for p in sweep)
            print(f"  {name_} {knob} sweep (recall@10 @ q/s): {points}")
    elif result.get("encoder_passages_per_s"):
        print(f"  {result['encoder']} encodes {result['encoder_passages_per_s']:.1f} passages/s here")


def plot_sweeps(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for name, result in results.items():
        dense = result.get("dense")
        if not dense:
            continue
        for index, sweep in dense["sweeps"].items():
            ax.plot([p["batch_qps"] for p in sweep], [p["recall10"] for p in sweep], "o-", label=index)
        ax.plot([dense["flat_qps"]], [1.0], "ks", label="Flat")
        ax.set_title(f"{dense['n_vectors']:,} sampled MiniLM-like vectors ({name})")
    ax.set_xscale("log")
    ax.set_xlabel("queries/s (batched)")
    ax.set_ylabel("recall@10 vs Flat")
    ax.axhline(0.98, color="grey", lw=0.5)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# ---------------------------------------------------------------- main


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="small corpora and sweeps: a minute or two")
    parser.add_argument("--corpora", nargs="+", choices=["miniwiki", "world"], default=["miniwiki", "world"])
    parser.add_argument("--parts", nargs="+", choices=["bm25", "dense"], default=["bm25", "dense"])
    parser.add_argument("--miniwiki", type=Path, default=default_data_dir() / "corpora" / "miniwiki.jsonl")
    parser.add_argument("--world-passages", type=int, help="default 1,000,000 (--quick: 20,000)")
    parser.add_argument("--queries", type=int, help="per corpus; default 1,000 (--quick: 200)")
    parser.add_argument("--dense-vectors", type=int, help="default: as many as world passages")
    parser.add_argument(
        "--fit-passages", type=int, help="real embeddings to fit; default 2,000 (--quick: 64)"
    )
    parser.add_argument("--ef-construction", type=int, default=200, help="default 200, as searchgym's Dense")
    parser.add_argument("--ef-search", type=int, nargs="+", help="default 16 32 64 96 128 256 512")
    parser.add_argument("--nprobe", type=int, nargs="+", help="default 1 4 16 64 256")
    parser.add_argument("--threads", type=int, default=2, help="threads of batched search and index builds")
    parser.add_argument("--work-dir", type=Path, default=default_data_dir() / "bench-retrieval")
    parser.add_argument("--out", type=Path, default=Path("runs/bench-retrieval"))
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    quick = args.quick
    args.world_passages = args.world_passages or (20_000 if quick else 1_000_000)
    args.queries = args.queries or (200 if quick else 1_000)
    args.dense_vectors = args.dense_vectors or args.world_passages
    args.fit_passages = args.fit_passages if args.fit_passages is not None else (64 if quick else 2_000)
    args.ef_search = args.ef_search or ([16, 32, 64, 128] if quick else [16, 32, 64, 96, 128, 256, 512])
    args.nprobe = args.nprobe or ([1, 8, 32] if quick else [1, 4, 16, 64, 256])
    return args


def main(argv=None) -> dict:
    args = parse_args(argv)
    args.work_dir.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    wiki_docs: list[Doc] = []
    if args.miniwiki.is_file():
        wiki_docs = list(read_corpus(args.miniwiki))[: 2_000 if args.quick else None]
    else:
        print(f"mini-Wikipedia corpus not found at {args.miniwiki}; fetch it with: {FETCH_MINIWIKI}")
    results: dict = {}
    for name in args.corpora:
        if name == "miniwiki":
            if not wiki_docs:
                continue
            corpus = args.work_dir / f"miniwiki-{len(wiki_docs)}.jsonl"
            write_corpus(wiki_docs, corpus)
            queries = wiki_queries(wiki_docs, args.queries)
        else:
            print(
                f"generated corpus of {args.world_passages:,} passages (cached in {args.work_dir})",
                flush=True,
            )
            corpus, queries = world_corpus(args.world_passages, args.work_dir)
            queries = queries[: args.queries]
        title = "mini-Wikipedia" if name == "miniwiki" else "generated world"
        print(f"{title}: BM25 ...", flush=True)
        n_docs = sum(1 for _ in corpus.open(encoding="utf-8"))
        result = {"passages": n_docs, "queries": len(queries), "threads": args.threads, "bm25": []}
        if "bm25" in args.parts:
            result["bm25"] = bench_bm25(corpus, queries, args, name)
        if "dense" in args.parts and name == "world":
            texts, fit_corpus = (
                [f"{d.title}\n{d.text}" for d in wiki_docs[: args.fit_passages]],
                "mini-Wikipedia",
            )
            if not texts:  # no mini-Wikipedia: fit on generated passages instead, and say so
                texts = [
                    f"{d.title}\n{d.text}" for d, _ in zip(read_corpus(corpus), range(args.fit_passages))
                ]
                fit_corpus = "generated passages (no mini-Wikipedia)"
            result["dense"] = bench_dense(texts, fit_corpus, args.dense_vectors, len(queries), args)
        results[title] = result
        print_corpus(title, result)
    (args.out / "retrieval.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    if any(r.get("dense") for r in results.values()):
        plot_sweeps(results, args.out / "dense_sweep.png")
    print(f"\nwritten: {args.out / 'retrieval.json'}", file=sys.stderr)
    return results


if __name__ == "__main__":
    main()
