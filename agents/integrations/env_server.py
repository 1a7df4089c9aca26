"""``searchgym serve-env``: any registered env as an OpenEnv server, with its tools over MCP.

Built on OpenEnv's own server (``openenv.core.env_server.HTTPEnvServer``), so any OpenEnv client
(trl, SkyRL, ART, torchforge, `SearchgymEnvClient`) plays it:

- ``/ws``: OpenEnv's WebSocket protocol, one env per connection (``reset`` / ``step`` /
  ``state``); the session ends, and its env is freed, when the client disconnects;
- ``/reset``, ``/step``, ``/state``: OpenEnv's stateless HTTP routes (a fresh env per request,
  so ``/step`` answers 409: play episodes over ``/ws`` or ``/mcp``);
- ``/schema``, ``/metadata``, ``/health``;
- ``/mcp``: the env's tools over the Model Context Protocol (`McpEndpoint`), in place of OpenEnv's
  own JSON-RPC dialect at that path, so that standard MCP clients work.

At most ``max_sessions`` sessions play at once (WebSocket and MCP together); one idle for
``idle_timeout_s`` is closed. A request body or WebSocket message over ``max_message_bytes`` is
refused (413, or the WebSocket closes with 1009 and its session ends) and the server keeps serving.
"""

from __future__ import annotations

import contextlib
import functools
import ipaddress
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from openenv.core.env_server.http_server import HTTPEnvServer
from openenv.core.env_server.types import ConcurrencyConfig
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from searchgym.agents.integrations.limits import (
    DEFAULT_IDLE_TIMEOUT_S,
    DEFAULT_MAX_MESSAGE_BYTES,
    DEFAULT_MAX_SESSIONS,
)
from searchgym.agents.integrations.mcp_endpoint import McpEndpoint
from searchgym.agents.integrations.openenv_env import (
    NoEpisodeError,
    SearchgymAction,
    SearchgymEnvironment,
    SearchgymObservation,
    SearchgymState,
)
from searchgym.agents.integrations.session import EnvSession
from searchgym.errors import ConfigError

LOOPBACK_HOSTS = ("127.0.0.1:*", "localhost:*", "[::1]:*")


def create_env_app(
    env_id: str,
    env_kwargs: dict[str, Any] | None = None,
    *,
    max_sessions: int = DEFAULT_MAX_SESSIONS,
    idle_timeout_s: float | None = DEFAULT_IDLE_TIMEOUT_S,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    host: str = "127.0.0.1",
) -> FastAPI:
    """The FastAPI app serving ``env_id`` made with ``env_kwargs`` (see the module docstring).
    The env is made once here, so a bad id or option fails before the server starts."""
    env_kwargs = dict(env_kwargs or {})
    if max_sessions < 1:
        raise ConfigError(f"max_sessions must be at least 1, got {max_sessions}")
    if idle_timeout_s is not None and not idle_timeout_s > 0:
        raise ConfigError(f"idle_timeout_s must be a positive number of seconds, got {idle_timeout_s}")
    if max_message_bytes < 1024:
        raise ConfigError(f"max_message_bytes must be at least 1024, got {max_message_bytes}")
    probe = EnvSession(env_id, **env_kwargs)
    env_server = _EnvServer(
        functools.partial(SearchgymEnvironment, env_id, env_kwargs),
        SearchgymAction,
        SearchgymObservation,
        concurrency_config=ConcurrencyConfig(
            max_concurrent_envs=max_sessions, session_timeout=idle_timeout_s
        ),
        env_name=env_id.replace("/", "_"),
        state_cls=SearchgymState,
    )
    endpoint = McpEndpoint(
        env_server,
        probe.tools,
        idle_timeout_s=idle_timeout_s,
        max_body_bytes=max_message_bytes,
        allowed_hosts=LOOPBACK_HOSTS if _is_loopback(host) else None,
    )
    probe.close()

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # A lifespan replaces Starlette's startup and shutdown events, so run those OpenEnv
        # registered (its idle-session reaper) here.
        for hook in app.router.on_startup:
            await hook()
        try:
            async with endpoint.manager.run():
                yield
        finally:
            for hook in app.router.on_shutdown:
                await hook()

    app = FastAPI(title=f"searchgym {env_id}", lifespan=lifespan)
    env_server.register_routes(app)
    # OpenEnv's /mcp speaks its own JSON-RPC dialect; standard MCP clients need the real protocol.
    app.router.routes[:] = [r for r in app.router.routes if getattr(r, "path", None) != "/mcp"]
    app.router.routes.append(Route("/mcp", endpoint=endpoint, methods=["GET", "POST", "DELETE"]))
    app.add_exception_handler(NoEpisodeError, _conflict)
    app.add_middleware(_MessageLimit, max_bytes=max_message_bytes)
    app.state.env_server = env_server
    return app


class _EnvServer(HTTPEnvServer):
    """OpenEnv's server, telling each session's env its id (its reset observation carries it, so
    a trainer on ``/ws`` can hand ``/mcp?session_id=ID`` to the agent it trains)."""

    async def _create_session(self) -> tuple[str, Any]:
        session_id, env = await super()._create_session()
        env.session_id = session_id
        return session_id, env


async def _conflict(request: Request, exc: Exception) -> JSONResponse:
    return JSONResponse({"detail": str(exc)}, status_code=409)


class _MessageLimit:
    """Refuse an HTTP request body larger than ``max_bytes`` (413, before reading it whole) and
    close a WebSocket that sends a larger message (1009, its session then ends as on a disconnect)."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            return await self.app(scope, self._websocket_receive(receive, send), send)
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope["headers"]).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.max_bytes:
            return await self._refuse(scope, receive, send)
        seen = 0

        async def counted() -> dict[str, Any]:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.max_bytes:
                raise _TooLarge
            return message

        try:
            await self.app(scope, counted, send)
        except _TooLarge:
            await self._refuse(scope, receive, send)

    def _websocket_receive(self, receive: Receive, send: Send) -> Receive:
        async def bounded() -> dict[str, Any]:
            message = await receive()
            payload = message.get("text") or message.get("bytes") or ""
            if message["type"] == "websocket.receive" and len(payload) > self.max_bytes:
                reason = f"message larger than {self.max_bytes:,} bytes"
                await send({"type": "websocket.close", "code": 1009, "reason": reason})
                return {"type": "websocket.disconnect", "code": 1009, "reason": reason}
            return message

        return bounded

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        detail = f"the request body is larger than {self.max_bytes:,} bytes (serve-env --max-message-kb)"
        await JSONResponse({"detail": detail}, status_code=413)(scope, receive, send)


class _TooLarge(Exception):
    pass


def _is_loopback(host: str) -> bool:
    """Whether ``host`` binds only the loopback interface (then MCP checks the Host header).

    >>> _is_loopback("127.0.0.1"), _is_loopback("localhost"), _is_loopback("0.0.0.0")
    (True, True, False)
    """
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
