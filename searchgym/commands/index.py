"""``searchgym index build``: build a search index from a JSONL corpus."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from searchgym.errors import SearchGymError
from searchgym.retrievers.index import build_index


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("index", help="build search indexes")
    build = p.add_subparsers(dest="index_command", required=True).add_parser(
        "build", help="build an index from a JSONL corpus and save it"
    )
    build.add_argument(
        "--corpus", type=Path, required=True, help='JSONL: {"id","title","text"} or {"id","contents"}'
    )
    build.add_argument(
        "--kind",
        default="bm25",
        # written out: telling the index kinds apart imports every kind's module, plug-ins' too
        help="a retriever kind that saves as an index: bm25 (default), dense, lucene or a plug-in's",
    )
    build.add_argument("--out", type=Path, required=True, help="index directory to write")
    build.add_argument("--encoder", default=None, help="dense: model name or path (default all-MiniLM-L6-v2)")
    build.add_argument("--index", choices=["flat", "hnsw", "ivfpq"], default=None, help="dense: FAISS index")
    build.add_argument("--batch-size", type=int, default=None, help="dense: passages per encoder batch")
    build.add_argument(
        "--shard-size", type=int, default=None, help="dense: passages per embedding shard (default 100,000)"
    )
    build.add_argument(
        "--keep-embeddings", action="store_true", default=None, help="dense: keep OUT/embeddings"
    )
    build.add_argument("--no-progress", action="store_true", help="hide progress bars")
    build.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    dense_only = {
        "encoder": args.encoder,
        "index": args.index,
        "batch_size": args.batch_size,
        "shard_size": args.shard_size,
        "keep_embeddings": args.keep_embeddings,
    }
    given = {key: value for key, value in dense_only.items() if value is not None}
    if given and args.kind != "dense":
        raise SearchGymError(
            f"--{', --'.join(k.replace('_', '-') for k in given)} only apply to --kind dense"
        )
    start = time.perf_counter()
    built = build_index(args.corpus, args.kind, args.out, show_progress=not args.no_progress, **given)
    print(
        f"{args.kind} index of {len(built):,} documents in {time.perf_counter() - start:.1f}s -> {args.out}"
    )
    return 0
