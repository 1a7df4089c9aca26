"""``searchgym serve``: a saved index over HTTP (Search-R1's ``POST /retrieve``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from searchgym.commands.common import bounded_int


def add_parser(sub: argparse._SubParsersAction) -> None:
    from searchgym.retrievers.server import Limits

    defaults = Limits()
    p = sub.add_parser("serve", help="serve an index over HTTP (Search-R1's POST /retrieve)")
    p.add_argument("--index", type=Path, required=True, help="directory of a saved index")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default loopback only)")
    p.add_argument("--port", type=bounded_int(0, 65535), default=8000, help="0 to 65535 (0: any free port)")
    p.add_argument("--topk", type=bounded_int(1), default=3, help="k when a request gives none")
    p.add_argument("--max-batch", type=bounded_int(1), default=64, help="most queries per batched search")
    p.add_argument("--batch-wait-ms", type=float, default=2.0, help="how long to gather a batch")
    p.add_argument(
        "--max-queries",
        type=bounded_int(1),
        default=defaults.max_queries,
        help="queries per request (413 above)",
    )
    p.add_argument(
        "--max-topk", type=bounded_int(1), default=defaults.max_topk, help="k per request (422 above)"
    )
    p.add_argument(
        "--max-results",
        type=bounded_int(1),
        default=defaults.max_results,
        help="queries x k per request, the documents it gets back (413 above)",
    )
    p.add_argument(
        "--max-body-mb",
        type=float,
        default=defaults.max_body_bytes / 2**20,
        help="size of a request's body in MiB (413 above)",
    )
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import uvicorn

    from searchgym.retrievers.index import load_index
    from searchgym.retrievers.server import Limits, create_app

    limits = Limits(
        max_queries=args.max_queries,
        max_topk=args.max_topk,
        max_results=args.max_results,
        max_body_bytes=int(args.max_body_mb * 2**20),
    )
    retriever = load_index(args.index)
    app = create_app(
        retriever,
        default_topk=args.topk,
        max_batch=args.max_batch,
        batch_wait_ms=args.batch_wait_ms,
        limits=limits,
    )
    print(f"serving {args.index} ({type(retriever).__name__}) on http://{args.host}:{args.port}", flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0
