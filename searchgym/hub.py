"""Whether the Hugging Face Hub can be reached, found out within seconds: offline, a hub load
would retry for about 40 s before failing. A leaf module: every layer may import it."""

from __future__ import annotations

import functools
import os
import socket
import threading
from pathlib import Path
from urllib.parse import urlsplit

CONNECT_TIMEOUT = 3.0
"""Seconds to wait for a TCP connection to the hub (name lookup included)."""


def local_files_only() -> bool:
    """True when hub loads should read only the local cache: ``HF_HUB_OFFLINE`` is set, or the
    hub (``HF_ENDPOINT``, default huggingface.co) does not answer within `CONNECT_TIMEOUT`."""
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
        return True
    return not _reachable(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))


def load_locally(path: str | os.PathLike) -> bool:
    """Whether transformers should load ``path`` with ``local_files_only``: it is a local
    directory, or the hub cannot be reached (offline, a load would fail only after its retries)."""
    return Path(path).is_dir() or local_files_only()


@functools.lru_cache(maxsize=4)
def _reachable(endpoint: str) -> bool:
    """Whether a TCP connection to ``endpoint`` opens within `CONNECT_TIMEOUT` (asked once per
    process). The lookup runs on a daemon thread: ``getaddrinfo`` cannot be interrupted."""
    parts = urlsplit(endpoint)
    host, port = parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)
    answer: list[bool] = []

    def connect() -> None:
        try:
            socket.create_connection((host, port), timeout=CONNECT_TIMEOUT).close()
            answer.append(True)
        except OSError:
            answer.append(False)

    thread = threading.Thread(target=connect, name="searchgym-hub-check", daemon=True)
    thread.start()
    thread.join(CONNECT_TIMEOUT)
    return bool(answer and answer[0])
