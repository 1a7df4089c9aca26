"""`SiteServer`: serve a directory of pages over HTTP on loopback, so a web env can browse an
offline site through the same `HttpSource` it would use on the live web.

Only files under the root are served: ``..`` in a path is dropped and a symlink that leads out of
the root is a 404, as is a directory without an ``index.html`` (no listings). Only 127.0.0.1 is
bound. Request logs go to this module's logger at DEBUG, never to stderr.

>>> import tempfile, pathlib
>>> root = pathlib.Path(tempfile.mkdtemp())
>>> _ = (root / "index.html").write_text("<title>Home</title>")
>>> from searchgym.retrievers.web.fetch import HttpSource
>>> with SiteServer(root) as server, HttpSource(allow_hosts=[server.host_port]) as source:
...     source.get(server.base_url + "index.html").content_type
'text/html'
"""

from __future__ import annotations

import logging
import os
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from searchgym.errors import DataNotFoundError

logger = logging.getLogger(__name__)

__all__ = ["SiteServer"]


class _Handler(SimpleHTTPRequestHandler):
    """Static files under ``directory``, nothing else: no listings, no escape through symlinks."""

    extensions_map = {**SimpleHTTPRequestHandler.extensions_map, ".html": "text/html", ".htm": "text/html"}

    def send_head(self):  # type: ignore[no-untyped-def]
        path = Path(self.translate_path(self.path))  # translate_path already drops ".." parts
        if path.is_dir():  # what the base class will open: the index page, or a listing (refused)
            path = next((path / n for n in ("index.html", "index.htm") if (path / n).exists()), path)
        if not path.resolve().is_relative_to(Path(self.directory).resolve()):
            self.send_error(404, "File not found")
            return None
        return super().send_head()

    def list_directory(self, path):  # type: ignore[no-untyped-def]
        self.send_error(404, "File not found")
        return None

    def log_message(self, format: str, *args: object) -> None:
        logger.debug("%s %s", self.address_string(), format % args)


class SiteServer:
    """A static file server for ``root_dir`` on 127.0.0.1 in a daemon thread.

    ``start()`` returns the base URL (``http://127.0.0.1:PORT/``, with the trailing slash, so
    ``base_url + "wiki/Paris.html"`` is a page URL); ``port`` 0 picks a free port. ``close()`` is
    idempotent; as a context manager it starts on entry and closes on exit. ``host_port``
    (``"127.0.0.1:PORT"``) is what `HttpSource` needs in ``allow_hosts`` to reach it.
    """

    def __init__(self, root_dir: str | os.PathLike, *, port: int = 0) -> None:
        self.root = Path(root_dir).resolve()
        if not self.root.is_dir():
            raise DataNotFoundError(f"no site directory at {self.root}; write the site first")
        self._port = port
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("the site server is not running; call start() first")
        return self._httpd.server_address[1]

    @property
    def host_port(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return f"http://{self.host_port}/"

    def start(self) -> str:
        """Start serving (once) and return the base URL."""
        if self._httpd is None:
            handler = partial(_Handler, directory=str(self.root))
            self._httpd = ThreadingHTTPServer(("127.0.0.1", self._port), handler)
            self._httpd.daemon_threads = True
            self._thread = threading.Thread(
                target=self._httpd.serve_forever, args=(0.05,), name="SiteServer", daemon=True
            )  # a short poll interval makes close() quick
            self._thread.start()
        return self.base_url

    def close(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            if self._thread is not None:
                self._thread.join(timeout=10)
            self._httpd, self._thread = None, None

    def __enter__(self) -> SiteServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
