"""``searchgym serve-env``: a registered env as an OpenEnv server, its tools over MCP."""

from __future__ import annotations

import argparse
import re

from searchgym.agents.integrations.openenv.limits import (
    DEFAULT_IDLE_TIMEOUT_S,
    DEFAULT_MAX_MESSAGE_BYTES,
    DEFAULT_MAX_SESSIONS,
)
from searchgym.commands.common import add_env_args, bounded_int
from searchgym.commands.serve import add_allowed_hosts
from searchgym.envs.registry import DEFAULT_ENV


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "serve-env",
        help="serve an env to other trainers: OpenEnv (HTTP, WebSocket) and its tools over MCP",
        description="Serve ENV_ID as an OpenEnv server: WebSocket sessions at /ws, /schema, /health, and "
        "the env's tools over MCP at /mcp (see docs/trainers/openenv.md).",
    )
    p.add_argument("env_id", nargs="?", default=DEFAULT_ENV, help=f"environment id (default {DEFAULT_ENV})")
    add_env_args(p, "keyword argument for the env, value read as YAML (e.g. -E split=test -E protocol=tags)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default loopback only)")
    p.add_argument("--port", type=bounded_int(0, 65535), default=8001, help="0 to 65535 (default 8001)")
    add_allowed_hosts(p)
    p.add_argument(
        "--allowed-origins",
        type=origins,
        default=[],
        metavar="ORIGIN,...",
        help="web pages (scheme://name[:port]) allowed to call the server besides loopback ones "
        "('*': any); a browser names its page in the Origin header, other clients send none",
    )
    p.add_argument(
        "--reveal-answers",
        action="store_true",
        help="send each task's gold answers, evidence and reasoning chain with its reset, for "
        "scripted agents that read them (the oracle); anyone who can reach the server reads them",
    )
    p.add_argument(
        "--max-sessions",
        type=bounded_int(1),
        default=DEFAULT_MAX_SESSIONS,
        help=f"sessions playing at once, WebSocket and MCP together (default {DEFAULT_MAX_SESSIONS})",
    )
    p.add_argument(
        "--idle-timeout",
        type=bounded_int(1),
        default=int(DEFAULT_IDLE_TIMEOUT_S),
        help=f"seconds before an idle session is closed (default {DEFAULT_IDLE_TIMEOUT_S:.0f})",
    )
    p.add_argument(
        "--max-message-kb",
        type=bounded_int(1),
        default=DEFAULT_MAX_MESSAGE_BYTES // 1024,
        help="largest request body or WebSocket message in KiB (413 or close 1009 above; default "
        f"{DEFAULT_MAX_MESSAGE_BYTES // 1024})",
    )
    p.set_defaults(run=run)


def origins(text: str) -> list[str]:
    """An argparse type: comma-separated web origins.

    >>> origins("https://app.example, http://10.0.0.5:3000")
    ['https://app.example', 'http://10.0.0.5:3000']
    """
    names = [name.strip() for name in text.split(",")]
    if not all(re.fullmatch(r"\*|https?://(\[[0-9A-Fa-f:.]+\]|[\w.-]+)(:\d+)?", name) for name in names):
        raise argparse.ArgumentTypeError(
            f"expected origins such as https://app.example:8080 separated by commas (no paths), got {text!r}"
        )
    return names


def run(args: argparse.Namespace) -> int:
    import logging

    import anyio
    import uvicorn

    # lazy: the openenv extra (optional), which imports the MCP SDK and gradio (3.5 s)
    from searchgym.agents.integrations.openenv.server import create_env_app

    max_bytes = args.max_message_kb * 1024
    app = create_env_app(
        args.env_id,
        dict(args.env_arg),
        max_sessions=args.max_sessions,
        idle_timeout_s=float(args.idle_timeout),
        max_message_bytes=max_bytes,
        host=args.host,
        allowed_hosts=args.allowed_hosts,
        allowed_origins=args.allowed_origins,
        reveal_answers=args.reveal_answers,
    )
    # The MCP SDK logs a traceback whenever a client ends its session while its event stream is
    # open (the stream is closed under the writer): that is a normal end, not an error.
    logging.getLogger("mcp.server.streamable_http").addFilter(
        lambda record: not (record.exc_info and isinstance(record.exc_info[1], anyio.ClosedResourceError))
    )
    # uvicorn's WebSocket protocol logs an error after every handshake refused with a response (a
    # foreign Host or Origin, answered 403 with the reason): a refusal, not an error.
    logging.getLogger("uvicorn.error").addFilter(
        lambda record: record.getMessage() != "ASGI callable returned without completing handshake."
    )
    url = f"http://{args.host}:{args.port}"
    print(f"serving {args.env_id} on {url}  (OpenEnv: {url}/ws  MCP: {url}/mcp)", flush=True)
    if args.reveal_answers:
        print("--reveal-answers: every reset sends the task's gold answers to the client", flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning", ws_max_size=max_bytes)
    return 0
