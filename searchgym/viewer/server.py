"""Running the viewer's app with uvicorn: in the foreground for the CLI, or in a thread for
tests and benchmarks (`ViewerServer`)."""

from __future__ import annotations

import threading
import time

import uvicorn
from fastapi import FastAPI

from searchgym.errors import SearchGymError


class ViewerServer:
    """``app`` served by uvicorn in a daemon thread on ``host``:``port`` (0: a free port);
    `url` once started. A context manager; `close` asks uvicorn to exit and waits for it."""

    def __init__(
        self, app: FastAPI, host: str = "127.0.0.1", port: int = 0, *, timeout: float = 20.0
    ) -> None:
        config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="off")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name="searchgym-viewer", daemon=True)
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

    def __enter__(self) -> ViewerServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
