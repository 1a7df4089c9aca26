"""Running the viewer's app with uvicorn: in the foreground for the CLI, or in a thread for
tests and benchmarks (`ViewerServer`)."""

from __future__ import annotations

import socket
import threading
import time

import uvicorn
from fastapi import FastAPI

from searchgym.errors import SearchGymError


class ViewerServer:
    """``app`` served by uvicorn in a daemon thread on ``host``:``port`` (0: a free port);
    `url` once started. A context manager; `close` asks uvicorn to exit and waits for it.
    An address that cannot be listened on (a port in use, a host name that does not resolve or
    is not this machine's) is a one-line `SearchGymError`."""

    def __init__(
        self, app: FastAPI, host: str = "127.0.0.1", port: int = 0, *, timeout: float = 20.0
    ) -> None:
        self.socket = _listen(host, port)  # here, so that a failure is ours to word, not uvicorn's
        config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="off")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.socket]}, name="searchgym-viewer", daemon=True
        )
        self.thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                self.close()
                raise SearchGymError(f"the viewer did not start on {host}:{port} within {timeout:g} s")
            time.sleep(0.02)
        sockname = self.server.servers[0].sockets[0].getsockname()
        self.url = f"http://{f'[{host}]' if ':' in host else host}:{sockname[1]}/"

    def close(self, timeout: float = 10.0) -> None:
        self.server.should_exit = True
        self.thread.join(timeout)
        self.socket.close()

    def __enter__(self) -> ViewerServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host``:``port`` as uvicorn binds one, or `SearchGymError` saying why
    it cannot be."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except (OSError, OverflowError) as e:  # OverflowError: a port past 65535
        sock.close()
        why = (e.strerror if isinstance(e, OSError) else None) or str(e)
        raise SearchGymError(
            f"the viewer cannot listen on {host}:{port} ({why}); choose another --port (0 picks a free "
            "one) or --host"
        ) from e
    return sock
