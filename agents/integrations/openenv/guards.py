"""The guards in front of every route of `searchgym serve-env`, HTTP and WebSocket alike (ASGI
middleware).

- `AccessCheck`: who may call. A request whose ``Host`` header names none of the server's names is
  refused (a web page cannot reach a loopback server by DNS rebinding), and so is one whose
  ``Origin`` header (sent by browsers) names a page the server does not trust (a page the user
  visits cannot open a session, read its task or take its slots). Loopback names and loopback
  pages are always trusted. An HTTP request is answered 400 (Host) or 403 (Origin); a WebSocket
  handshake 403, before it is accepted; both with the reason as ``{"detail": ...}``.
- `MessageCheck`: what a message may be. A body or WebSocket message larger than ``max_bytes`` is
  refused (413, or the WebSocket closes with 1009). A body that is not UTF-8 or JSON nested deeper
  than `MAX_DEPTH` is answered 400 (in JSON-RPC's form on ``/mcp``). On a WebSocket, a binary
  frame, JSON that is not an object, and an unknown message type each get an error message naming
  the problem, and the session goes on. `Socket.close` ends a WebSocket from another task (the
  server closes an idle session's socket this way): the client gets the close code and reason, and
  the session's handler sees a disconnect at its next read.

`searchgym.serving.HostCheck` guards the retrieval server the same way for HTTP only,
by exact names; these also guard WebSockets and accept any loopback address (``127.0.0.2``).
"""

from __future__ import annotations

import asyncio
import contextvars
import json
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from openenv.core.env_server.types import WSErrorCode, WSErrorResponse
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from searchgym.serving import host_name, is_loopback

MAX_DEPTH = 64
"""The deepest nesting of arrays and objects a message may have."""
MESSAGE_TYPES = ("reset", "step", "state", "close")
"""The WebSocket messages a client sends."""
CURRENT_SOCKET: contextvars.ContextVar[Socket | None] = contextvars.ContextVar("socket", default=None)
"""The WebSocket whose session the current task serves (set by `MessageCheck`)."""


class AccessCheck:
    """Refuse requests for names other than loopback ones and ``hosts``, and from pages other
    than loopback ones and ``origins`` (``"scheme://name[:port]"``); ``"*"`` allows any."""

    def __init__(self, app: ASGIApp, hosts: Sequence[str], origins: Sequence[str]) -> None:
        self.app = app
        self.hosts = {h.lower() for h in hosts}
        self.origins = {o.rstrip("/").lower() for o in origins}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        headers = Headers(scope=scope)
        host, origin = host_name(headers.get("host", "")), headers.get("origin")
        if not (is_loopback(host) or "*" in self.hosts or host in self.hosts):
            name = host[:100] or "NAME"
            detail = (
                f"this server answers requests for loopback names{self._listed(self.hosts)}, not "
                f"{host[:100]!r}; to serve that name, start it with --allowed-hosts {name}"
            )
            return await _deny(scope, receive, send, 400, detail)
        if origin is not None and not self._trusted(origin):
            detail = (
                f"pages from {origin[:100]!r} may not call this server (it trusts loopback pages"
                f"{self._listed(self.origins)}); to trust them, start it with --allowed-origins "
                f"{origin[:100]}"
            )
            return await _deny(scope, receive, send, 403, detail)
        await self.app(scope, receive, send)

    def _trusted(self, origin: str) -> bool:
        if "*" in self.origins or origin.rstrip("/").lower() in self.origins:
            return True
        parts = urlsplit(origin)
        return parts.scheme in ("http", "https") and is_loopback(parts.hostname or "")

    @staticmethod
    def _listed(names: set[str]) -> str:
        return f" and {', '.join(sorted(names))}" if names else ""


async def _deny(scope: Scope, receive: Receive, send: Send, status: int, detail: str) -> None:
    """Answer ``detail`` with ``status`` (a WebSocket handshake: 403, or a close before accepting
    it where the server cannot answer a handshake with a response)."""
    if scope["type"] == "websocket":
        if "websocket.http.response" not in scope.get("extensions", {}):
            return await send({"type": "websocket.close", "code": 1008, "reason": detail[:120]})
        status = 403
    await JSONResponse({"detail": detail}, status_code=status)(scope, receive, send)


class BadMessage(ValueError):
    """A message the server cannot read at all (not UTF-8, nested too deep, binary)."""


def load_json(data: bytes | str) -> Any:
    """``data`` as JSON; `BadMessage` for text that is not UTF-8 or nested deeper than
    `MAX_DEPTH`, ``json.JSONDecodeError`` for text that is not JSON.

    >>> load_json(b'{"type": "state"}')
    {'type': 'state'}
    >>> load_json("[" * 100_000 + "]" * 100_000)
    Traceback (most recent call last):
    ...
    searchgym.agents.integrations.openenv.guards.BadMessage: the JSON is nested deeper than 64 levels
    """
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
    except UnicodeDecodeError as e:
        where = f"byte {e.start} is {data[e.start]:#04x}"
        raise BadMessage(f"the body is not UTF-8 text ({where}): send UTF-8 JSON") from None
    too_deep = BadMessage(f"the JSON is nested deeper than {MAX_DEPTH} levels")
    try:
        value = json.loads(text)
    except RecursionError:
        raise too_deep from None
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        for child in children:
            if isinstance(child, (dict, list)):
                if depth >= MAX_DEPTH:
                    raise too_deep
                stack.append((child, depth + 1))
    return value


class MessageCheck:
    """Bound and check every request body and WebSocket message (see the module docstring)."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            socket = Socket(receive, send, self.max_bytes)
            CURRENT_SOCKET.set(socket)
            return await self.app(scope, socket.receive, socket.send)
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope["headers"]).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.max_bytes:
            return await self._too_large(scope, receive, send)
        body, more = bytearray(), True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            more = message.get("more_body", False)
            if len(body) > self.max_bytes:
                return await self._too_large(scope, receive, send)
        if body:
            try:
                load_json(bytes(body))
            except BadMessage as e:
                return await self._bad(scope, receive, send, str(e))
            except ValueError:
                pass  # not JSON: the route answers that itself, saying where
        await self.app(scope, replay_body(bytes(body), receive), send)

    async def _too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        detail = f"the request body is larger than {self.max_bytes:,} bytes (serve-env --max-message-kb)"
        await JSONResponse({"detail": detail}, status_code=413)(scope, receive, send)

    @staticmethod
    async def _bad(scope: Scope, receive: Receive, send: Send, detail: str) -> None:
        if scope["path"] == "/mcp":  # in JSON-RPC's form, as MCP clients read errors
            error = {"code": -32700, "message": f"Parse error: {detail}"}
            content: dict[str, Any] = {"jsonrpc": "2.0", "id": None, "error": error}
        else:
            content = {"detail": detail}
        await JSONResponse(content, status_code=400)(scope, receive, send)


def replay_body(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that hands over ``body`` (read already) in one message, then the rest of the
    connection's messages (its disconnect) from ``receive``."""
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if replayed:
            return await receive()
        replayed = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


class Socket:
    """One WebSocket connection between the client and the server's handler: checks each message
    the client sends, answering a bad one itself, and can be closed from another task."""

    def __init__(self, receive: Receive, send: Send, max_bytes: int) -> None:
        self._receive, self._send, self.max_bytes = receive, send, max_bytes
        self._closing = asyncio.Event()
        self._close: tuple[int, str] | None = None
        self._next: asyncio.Future[Message] | None = None
        self.closed = False
        """Whether this side closed the connection (the handler's own close is then dropped)."""

    def close(self, code: int, reason: str) -> None:
        """Close the connection with ``code`` and ``reason`` (the handler's next read sees a
        disconnect; if it is reading, at once)."""
        self._close = (code, reason)
        self._closing.set()

    async def send(self, message: Message) -> None:
        if not self.closed:
            await self._send(message)

    async def receive(self) -> Message:
        while True:
            message = await self._read()
            if message["type"] != "websocket.receive":
                return message
            text = message.get("text")
            if len(text if text is not None else message.get("bytes") or b"") > self.max_bytes:
                self.close(1009, f"message larger than {self.max_bytes:,} bytes")
                return await self._read()
            problem = _problem(text)
            if problem is None:
                return message
            await self._send({"type": "websocket.send", "text": problem.model_dump_json()})

    async def _read(self) -> Message:
        if self._close is None:
            if self._next is None:
                self._next = asyncio.ensure_future(self._receive())
            closing = asyncio.ensure_future(self._closing.wait())
            await asyncio.wait((self._next, closing), return_when=asyncio.FIRST_COMPLETED)
            closing.cancel()
            if self._close is None:
                message, self._next = self._next.result(), None
                return message
        if self._next is not None:
            self._next.cancel()
            self._next = None
        code, reason = self._close
        if not self.closed:
            self.closed = True
            await self._send({"type": "websocket.close", "code": code, "reason": reason})
        return {"type": "websocket.disconnect", "code": code, "reason": reason}


def _problem(text: str | None) -> WSErrorResponse | None:
    """The error a WebSocket message gets before the session reads it, or None to let it read it
    (invalid JSON too: OpenEnv's handler says where it is invalid)."""
    if text is None:
        return _error(
            'binary frames are not read: send JSON text frames such as {"type": "reset", "data": {}}',
            WSErrorCode.INVALID_JSON,
        )
    try:
        message = load_json(text)
    except BadMessage as e:
        return _error(str(e), WSErrorCode.INVALID_JSON)
    except ValueError:
        return None
    if not isinstance(message, dict):
        return _error(
            'a message is a JSON object such as {"type": "reset", "data": {}}, '
            f"not {_KINDS[type(message)]}",
            WSErrorCode.INVALID_JSON,
        )
    kind = message.get("type")
    if kind not in MESSAGE_TYPES:
        also = "; MCP is served at /mcp" if kind == "mcp" else ""
        return _error(
            f"unknown message type {kind!r}: send one of {', '.join(MESSAGE_TYPES)}{also}",
            WSErrorCode.UNKNOWN_TYPE,
        )
    return None


_KINDS = {list: "an array", str: "a string", int: "a number", float: "a number", bool: "true or false"}
_KINDS[type(None)] = "null"


def _error(message: str, code: WSErrorCode) -> WSErrorResponse:
    return WSErrorResponse(data={"message": message, "code": code})
