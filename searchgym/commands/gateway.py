"""``searchgym gateway``: an OpenAI-compatible server in front of a local policy that records the
token ids and log-probs of every call it samples (see docs/programs.md)."""

from __future__ import annotations

import argparse
from pathlib import Path

from searchgym.commands.common import bounded_int


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "gateway",
        help="serve a local policy as an OpenAI-compatible API that records every sampled token",
        description="Serve MODEL at /v1/chat/completions, /v1/completions and /v1/models. Each API key "
        "is an episode of its own; with --record, every call's prompt ids, sampled ids and log-probs "
        "are appended to a JSONL file (see docs/programs.md).",
    )
    p.add_argument(
        "--model", default="smollm2-135m-instruct", help="offline alias, hub id or local directory"
    )
    p.add_argument(
        "--policy", default="cpu", help="policy backend that loads it (default cpu; hf, vllm, ...)"
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default loopback only)")
    p.add_argument("--port", type=bounded_int(0, 65535), default=8002, help="0 to 65535 (default 8002)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--max-new-tokens",
        type=bounded_int(1),
        default=512,
        help="the most tokens one call samples (default 512)",
    )
    p.add_argument("--record", type=Path, default=None, help="append every call's tokens to this JSONL file")
    p.add_argument(
        "--window-ms",
        type=bounded_int(0),
        default=20,
        help="how long the first waiting request waits for others to share its batch (default 20)",
    )
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import uvicorn

    # lazy: torch and transformers, only to serve
    from searchgym.agents.gateway.server import Gateway
    from searchgym.agents.registry import load_policy
    from searchgym.generation import SamplingParams
    from searchgym.serving import loopback_guard, uvicorn_config

    policy = load_policy(args.policy, args.model, args.seed)
    gateway = Gateway(
        policy,
        SamplingParams(max_new_tokens=args.max_new_tokens),
        name=args.model,
        window_s=args.window_ms / 1000,
        open_keys=True,
        sampling_from_requests=True,
        record=args.record,
    )
    app = loopback_guard(gateway.app, args.host)
    url = f"http://{args.host}:{args.port}/v1"
    recording = f", recording to {args.record}" if args.record else ""
    print(f"serving {args.model} ({args.policy}) on {url}{recording}", flush=True)
    try:
        uvicorn.Server(uvicorn_config(app, args.host, args.port)).run()
    finally:
        gateway.close()
    return 0
