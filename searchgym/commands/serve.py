"""``searchgym serve``: a saved index over HTTP (Search-R1's ``POST /retrieve``)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from searchgym.commands.common import bounded_float, bounded_int
from searchgym.retrievers.index import load_index
from searchgym.retrievers.server import Limits, create_app, uvicorn_config
from searchgym.serving import is_loopback


def add_parser(sub: argparse._SubParsersAction) -> None:
    defaults = Limits()
    p = sub.add_parser("serve", help="serve an index over HTTP (Search-R1's POST /retrieve)")
    p.add_argument("--index", type=Path, required=True, help="directory of a saved index")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default loopback only)")
    p.add_argument("--port", type=bounded_int(0, 65535), default=8000, help="0 to 65535 (0: any free port)")
    add_allowed_hosts(p)
    p.add_argument("--topk", type=bounded_int(1), default=3, help="k when a request gives none")
    p.add_argument(
        "--max-batch", type=bounded_int(1, 100_000), default=64, help="most queries per batched search"
    )
    p.add_argument(
        "--max-batch-chars",
        type=bounded_int(1),
        default=8_192,
        help="most query characters per batched search: bounds how long a small request waits",
    )
    p.add_argument(
        "--batch-wait-ms", type=bounded_float(0, 1000), default=2.0, help="how long to gather a batch"
    )
    p.add_argument(
        "--max-queries",
        type=bounded_int(1),
        default=defaults.max_queries,
        help="queries per request (413 above)",
    )
    p.add_argument(
        "--max-query-chars",
        type=bounded_int(1),
        default=defaults.max_query_chars,
        help="characters per query (413 above)",
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
        type=bounded_float(0.001, 1024),
        default=defaults.max_body_bytes / 2**20,
        help="size of a request's body in MiB (413 above)",
    )
    p.add_argument(
        "--read-timeout",
        type=bounded_float(0.1, 3600),
        default=10.0,
        help="seconds a client has to send a request's headers, and again its body (408)",
    )
    p.set_defaults(run=run)


def add_allowed_hosts(p: argparse.ArgumentParser) -> None:
    """``--allowed-hosts``, as `serve` and `serve-env` take it."""
    p.add_argument(
        "--allowed-hosts",
        type=host_names,
        default=None,
        metavar="NAME,...",
        help="Host header names answered besides loopback ones ('*': any; the default when --host "
        "is not a loopback address); guards a loopback server against DNS rebinding",
    )


def host_names(text: str) -> list[str]:
    """An argparse type: comma-separated Host names.

    >>> host_names("retriever.internal, 10.0.0.5")
    ['retriever.internal', '10.0.0.5']
    """
    names = [name.strip() for name in text.split(",")]
    if not all(re.fullmatch(r"\*|\[[0-9A-Fa-f:.]+\]|[\w.-]+", name) for name in names):
        raise argparse.ArgumentTypeError(f"expected host names separated by commas (no ports), got {text!r}")
    return names


def run(args: argparse.Namespace) -> int:
    import uvicorn

    limits = Limits(
        max_queries=args.max_queries,
        max_topk=args.max_topk,
        max_results=args.max_results,
        max_body_bytes=int(args.max_body_mb * 2**20),
        max_query_chars=args.max_query_chars,
    )
    if args.allowed_hosts is None:
        args.allowed_hosts = [] if is_loopback(args.host) else ["*"]
    retriever = load_index(args.index)
    app = create_app(
        retriever,
        default_topk=args.topk,
        max_batch=args.max_batch,
        max_batch_chars=args.max_batch_chars,
        batch_wait_ms=args.batch_wait_ms,
        limits=limits,
        allowed_hosts=args.allowed_hosts,
        read_timeout=args.read_timeout,
    )
    print(f"serving {args.index} ({type(retriever).__name__}) on http://{args.host}:{args.port}", flush=True)
    uvicorn.Server(uvicorn_config(app, args.host, args.port)).run()
    return 0
