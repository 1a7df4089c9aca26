"""Whether the Hugging Face Hub can be reached, found out within seconds: offline, a hub load
would retry for about 40 s before failing. A leaf module: every layer may import it."""

from __future__ import annotations

import functools
import os
import socket
import threading
from pathlib import Path
from urllib.parse import urlsplit

from searchgym.errors import DataNotFoundError, DependencyNotInstalled, import_optional

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


def download_dataset_file(repo_id: str, filename: str, instead: str) -> Path:
    """``filename`` of the Hub dataset ``repo_id``, downloaded or from the Hub's local cache. Where
    the hub cannot be reached only the cache is read, so the error comes within seconds, not after
    the hub's retries. ``instead`` says how to do without the hub (``pass --source DIR``), in
    every error."""
    try:
        hub = import_optional("huggingface_hub", "data")
    except DependencyNotInstalled as e:
        raise DependencyNotInstalled(f"{e}, or {instead}") from e
    offline = local_files_only()
    try:
        return Path(hub.hf_hub_download(repo_id, filename, repo_type="dataset", local_files_only=offline))
    except Exception as e:  # the hub raises many kinds (offline, HTTP, missing entry); report all
        why = (
            "the hub cannot be reached and it is not in the local cache"
            if offline
            else f"{type(e).__name__}: {e}"
        )
        raise DataNotFoundError(
            f"could not download {filename} from the Hugging Face Hub dataset {repo_id!r} ({why}). "
            f"Check the network connection and that HF_HUB_OFFLINE is not set, or download the file "
            f"yourself and {instead}"
        ) from e
