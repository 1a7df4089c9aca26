"""Whether the Hugging Face Hub can be reached, found out within seconds: where it cannot, a hub
load would retry for 40 s (connections refused) or minutes (a firewall or proxy that accepts
connections and never answers) before failing. A leaf module: every layer may import it."""

from __future__ import annotations

import functools
import os
import threading
from pathlib import Path

from searchgym.errors import DataNotFoundError, DependencyNotInstalled, import_optional

PROBE_TIMEOUT = 3.0
"""Seconds to wait for the hub to answer an HTTP request (name lookup and connection included)."""


def endpoint() -> str:
    """The hub's address: ``HF_ENDPOINT``, default https://huggingface.co."""
    return os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")


def offline_by_choice() -> bool:
    """Whether ``HF_HUB_OFFLINE`` is set: hub loads read only the local cache."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def local_files_only() -> bool:
    """True when hub loads should read only the local cache: ``HF_HUB_OFFLINE`` is set, or the
    hub (`endpoint`) does not answer within `PROBE_TIMEOUT`."""
    return offline_by_choice() or not _reachable(endpoint())


def load_locally(path: str | os.PathLike) -> bool:
    """Whether transformers should load ``path`` with ``local_files_only``: it is a local
    directory, or the hub cannot be reached (offline, a load would fail only after its retries)."""
    return Path(path).is_dir() or local_files_only()


def why_not_loaded(path: str | os.PathLike, error: Exception) -> str:
    """Why the transformers load of ``path`` that raised ``error`` failed, in one line: for a hub
    id read from the local cache alone, that the hub was not asked and why (transformers' own
    message would send one to its docs); else ``error``'s message.

    >>> why_not_loaded(".", OSError("no file named\\nconfig.json in ."))  # a local directory
    'no file named config.json in .'
    """
    if not Path(path).is_dir() and offline_by_choice():
        return "HF_HUB_OFFLINE is set and it is not in the local Hugging Face cache"
    if not Path(path).is_dir() and local_files_only():
        return (
            f"the Hugging Face Hub ({endpoint()}) did not answer within {PROBE_TIMEOUT:g} s and it is not "
            "in the local cache"
        )
    return " ".join(str(error).split())  # transformers' messages span lines


@functools.lru_cache(maxsize=4)
def _reachable(url: str) -> bool:
    """Whether the hub at ``url`` answers an HTTP request within `PROBE_TIMEOUT` with anything but
    a server error (asked once per process, through the proxies the environment names, as
    huggingface_hub does). A TCP connection is not enough: a firewall or proxy that accepts it and
    never answers would leave each hub load waiting out its timeouts and retries. The request runs
    on a daemon thread, since a name lookup cannot be interrupted."""
    answer: list[bool] = []

    def ask() -> None:
        import httpx  # only where a hub load is about to happen

        try:
            with httpx.Client(timeout=PROBE_TIMEOUT) as client:
                answer.append(client.head(url).status_code < 500)
        except Exception:  # no answer, an endpoint that is no URL, a proxy scheme httpx lacks: no hub
            answer.append(False)

    thread = threading.Thread(target=ask, name="searchgym-hub-check", daemon=True)
    thread.start()
    thread.join(PROBE_TIMEOUT)
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
