"""``searchgym serve``: a saved index over HTTP (Search-R1's ``POST /retrieve``)."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="serve an index over HTTP (Search-R1's POST /retrieve)")
    p.add_argument("--index", type=Path, required=True, help="directory of a saved index")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default loopback only)")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--topk", type=int, default=3, help="k when a request gives none")
    p.add_argument("--max-batch", type=int, default=64, help="most queries per batched search")
    p.add_argument("--batch-wait-ms", type=float, default=2.0, help="how long to gather a batch")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import uvicorn

    from searchgym.retrievers.index import load_index
    from searchgym.retrievers.server import create_app

    retriever = load_index(args.index)
    app = create_app(
        retriever, default_topk=args.topk, max_batch=args.max_batch, batch_wait_ms=args.batch_wait_ms
    )
    print(f"serving {args.index} ({type(retriever).__name__}) on http://{args.host}:{args.port}", flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0
