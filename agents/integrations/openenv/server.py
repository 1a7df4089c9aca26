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
``idle_timeout_s`` is closed, and so is its WebSocket (code `IDLE_CLOSE_CODE`, with the reason),
so that no client plays past the cap. Every route is guarded (`searchgym.agents.integrations.openenv.guards`):
requests for names other than loopback ones and ``allowed_hosts``, or from browser pages other than
loopback ones and ``allowed_origins``, are refused; a request body or WebSocket message over
``max_message_bytes`` is refused (413, or the WebSocket closes with 1009 and its session ends), and
a malformed one gets a 4xx or an error message naming the problem, while the server keeps serving.

A task's gold answers, evidence and metadata (its reasoning chain) stay on the server: a reset
sends the task's id and question only, unless ``reveal_answers`` (``--reveal-answers``) is set for
scripted agents that read them (the oracle).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from openenv.core.env_server.http_server import HTTPEnvServer
from openenv.core.env_server.types import ConcurrencyConfig
from starlette.routing import Route

from searchgym.agents.integrations.openenv.environment import SearchgymEnvironment
from searchgym.agents.integrations.openenv.guards import CURRENT_SOCKET, AccessCheck, MessageCheck, Socket
from searchgym.agents.integrations.openenv.limits import (
    DEFAULT_IDLE_TIMEOUT_S,
    DEFAULT_MAX_MESSAGE_BYTES,
    DEFAULT_MAX_SESSIONS,
)
from searchgym.agents.integrations.openenv.mcp_endpoint import McpEndpoint
from searchgym.agents.integrations.openenv.messages import (
    BadResetError,
    NoEpisodeError,
    SearchgymAction,
    SearchgymObservation,
    SearchgymState,
)
from searchgym.agents.play.session import EnvSession
from searchgym.errors import ConfigError
from searchgym.serving import is_loopback

IDLE_CLOSE_CODE = 4000
"""The close code of a WebSocket whose session was idle for longer than the server's timeout."""


def create_env_app(
    env_id: str,
    env_kwargs: dict[str, Any] | None = None,
    *,
    max_sessions: int = DEFAULT_MAX_SESSIONS,
    idle_timeout_s: float | None = DEFAULT_IDLE_TIMEOUT_S,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    host: str = "127.0.0.1",
    allowed_hosts: Sequence[str] | None = None,
    allowed_origins: Sequence[str] = (),
    reveal_answers: bool = False,
) -> FastAPI:
    """The FastAPI app serving ``env_id`` made with ``env_kwargs`` (see the module docstring).
    ``host`` is the address it will bind: on a loopback one, ``allowed_hosts`` defaults to none
    besides loopback names, elsewhere to ``["*"]`` (any). The env is made once here, so a bad id
    or option fails before the server starts."""
    env_kwargs = dict(env_kwargs or {})
    if max_sessions < 1:
        raise ConfigError(f"max_sessions must be at least 1, got {max_sessions}")
    if idle_timeout_s is not None and not idle_timeout_s > 0:
        raise ConfigError(f"idle_timeout_s must be a positive number of seconds, got {idle_timeout_s}")
    if max_message_bytes < 1024:
        raise ConfigError(f"max_message_bytes must be at least 1024, got {max_message_bytes}")
    if allowed_hosts is None:
        allowed_hosts = [] if is_loopback(host) else ["*"]
    probe = EnvSession(env_id, **env_kwargs)
    env_server = _EnvServer(
        functools.partial(SearchgymEnvironment, env_id, env_kwargs, reveal_answers=reveal_answers),
        SearchgymAction,
        SearchgymObservation,
        concurrency_config=ConcurrencyConfig(
            max_concurrent_envs=max_sessions, session_timeout=idle_timeout_s
        ),
        env_name=env_id.replace("/", "_"),
        state_cls=SearchgymState,
    )
    endpoint = McpEndpoint(
        env_server, probe.tools, idle_timeout_s=idle_timeout_s, max_body_bytes=max_message_bytes
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
    app.add_exception_handler(BadResetError, _unprocessable)
    app.add_middleware(MessageCheck, max_bytes=max_message_bytes)
    app.add_middleware(AccessCheck, hosts=allowed_hosts, origins=allowed_origins)  # the outermost
    app.state.env_server = env_server
    return app


class _EnvServer(HTTPEnvServer):
    """OpenEnv's server, telling each session's env its id (its reset observation carries it, so
    a trainer on ``/ws`` can hand ``/mcp?session_id=ID`` to the agent it trains), and closing the
    WebSocket of a session it ends while its client is still connected (an idle one)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._sockets: dict[str, Socket] = {}  # session id -> the WebSocket that opened it

    async def _create_session(self) -> tuple[str, Any]:
        session_id, env = await super()._create_session()
        env.session_id = session_id
        socket = CURRENT_SOCKET.get()
        if socket is not None:
            self._sockets[session_id] = socket
        return session_id, env

    async def _destroy_session(self, session_id: str) -> None:
        socket = self._sockets.pop(session_id, None)
        if socket is not None and socket is not CURRENT_SOCKET.get():  # not its own handler: the reaper
            idle = self._session_idle_timeout_s  # closed first: no message is played from now on
            socket.close(IDLE_CLOSE_CODE, f"session closed after {idle:g} s idle (--idle-timeout)")
        await super()._destroy_session(session_id)


async def _conflict(request: Request, exc: Exception) -> JSONResponse:
    return JSONResponse({"detail": str(exc)}, status_code=409)


async def _unprocessable(request: Request, exc: Exception) -> JSONResponse:
    return JSONResponse({"detail": str(exc)}, status_code=422)
