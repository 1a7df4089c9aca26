"""Serving an app with uvicorn, hardened: a Host check against DNS rebinding, a deadline for slow
request headers, idle keep-alive connections closed, and a server in a background thread (tests,
notebooks, envs that start their own server). The retrieval server (`searchgym.retrievers.server`),
the env server and the gateway serve through it."""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import logging
import threading
import time
from collections.abc import Sequence
from typing import Any

import h11
import uvicorn
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from uvicorn.protocols.http.h11_impl import H11Protocol

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
KEEP_ALIVE_S = 5
"""Seconds an idle keep-alive connection stays open (uvicorn's ``timeout_keep_alive``)."""

log = logging.getLogger(__name__)


class HostCheck:
    """ASGI middleware: answers 400 to a request whose Host header names none of ``hosts``
    (``"*"`` lets any through), so a web page cannot reach a loopback server by DNS rebinding."""

    def __init__(self, app, hosts: Sequence[str]) -> None:
        self.app, self.hosts = app, {h.lower() for h in hosts}

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http" and "*" not in self.hosts:
            host = host_name(Headers(scope=scope).get("host", ""))
            if host not in self.hosts:
                name = host[:100] or "NAME"
                detail = (
                    f"this server answers requests for {', '.join(sorted(self.hosts))}, not {host[:100]!r}; "
                    f"to serve that name, start it with --allowed-hosts {name}"
                )
                await JSONResponse({"detail": detail}, status_code=400)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` serves only this machine: ``localhost``, 127.0.0.0/8 or ::1.

    >>> is_loopback("127.0.0.2"), is_loopback("[::1]"), is_loopback("localhost"), is_loopback("0.0.0.0")
    (True, True, True, False)
    """
    host = host.strip().lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def loopback_guard(app: Any, host: str) -> Any:
    """``app`` behind a `HostCheck` for the loopback names and ``host`` itself where ``host`` is
    a loopback address (any of 127.0.0.0/8, ::1, localhost); ``app`` as it is on any other bind,
    where the address is meant to be reached by other names."""
    if not is_loopback(host):
        return app
    bound = host.strip().lower()
    bound = f"[{bound.strip('[]')}]" if ":" in bound else bound
    return HostCheck(app, [*LOOPBACK_HOSTS, bound])


def host_name(header: str) -> str:
    """The name in a Host header, without its port.

    >>> host_name("[::1]:8000"), host_name("LocalHost:80"), host_name("example.org")
    ('[::1]', 'localhost', 'example.org')
    """
    header = header.strip().lower()
    if header.startswith("["):
        return header[: header.find("]") + 1]
    return header.rpartition(":")[0] if ":" in header else header


class ReadDeadlineH11(H11Protocol):
    """uvicorn's h11 protocol that closes a connection whose request headers have not all
    arrived ``read_timeout`` seconds after it opened or after their first byte (uvicorn times
    out only idle keep-alive connections; the app times out the body)."""

    def __init__(self, *args, read_timeout: float, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.read_timeout = read_timeout
        self._deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._deadline = self.loop.call_later(self.read_timeout, self._expired)

    def data_received(self, data: bytes) -> None:
        if self._deadline is None and self.conn.their_state is h11.IDLE:  # a next request begins
            self._deadline = self.loop.call_later(self.read_timeout, self._expired)
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:
            self._disarm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self) -> None:
        self._deadline = None
        if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
            return
        received = len(self.conn.trailing_data[0])
        if received:  # a connection that sent nothing is closed without a word, like an idle one
            client = f"{self.client[0]}:{self.client[1]}" if self.client else "a client"
            log.warning(
                "closed the connection of %s: only %d bytes of request headers in %g s (--read-timeout)",
                client,
                received,
                self.read_timeout,
            )
        self.transport.close()


def uvicorn_config(app: Any, host: str = "127.0.0.1", port: int = 0) -> uvicorn.Config:
    """uvicorn's settings for ``app``: idle keep-alive connections close after `KEEP_ALIVE_S`
    and, for an app of `create_app`, slow request headers after its ``read_timeout``."""
    read_timeout = getattr(getattr(app, "state", None), "read_timeout", None)
    http = functools.partial(ReadDeadlineH11, read_timeout=read_timeout) if read_timeout else "auto"
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        timeout_keep_alive=KEEP_ALIVE_S,
        http=http,  # type: ignore[arg-type]
    )


class ServerThread:
    """Run an app with uvicorn in a background thread (tests, notebooks, envs that start their
    own server). ``url`` is known once the context is entered; the port is free-picked when 0.

    >>> from searchgym.retrievers import BM25, Doc
    >>> from searchgym.retrievers.server import create_app
    >>> app = create_app(BM25.build([Doc("a", "Paris", "capital of France")]))
    >>> with ServerThread(app) as server:
    ...     server.url.startswith("http://127.0.0.1:")
    True
    """

    def __init__(self, app: Any, host: str = "127.0.0.1", port: int = 0) -> None:
        self._server = uvicorn.Server(uvicorn_config(app, host, port))
        self._server.install_signal_handlers = lambda: None  # type: ignore[method-assign]
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self.url = ""

    def __enter__(self) -> ServerThread:
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the retrieval server did not start")
            time.sleep(0.01)
        host, port = self._server.servers[0].sockets[0].getsockname()[:2]
        self.url = f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
