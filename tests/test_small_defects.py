"""The smaller defects of issue 17: atomic writes keep the umask's permissions, hub loads fail
within seconds offline and name the local alternative, DNS lookups never hold up exit."""

from __future__ import annotations

import os
import socket
import threading
import time

import pytest

from searchgym import hub
from searchgym.errors import DataNotFoundError
from searchgym.files import replace_atomically
from searchgym.retrievers.web import guard


def test_atomic_writes_keep_the_umask_permissions(tmp_path):
    old = os.umask(0o022)
    try:
        with replace_atomically(tmp_path / "a.txt") as f:
            f.write("x")
        os.umask(0o077)
        with replace_atomically(tmp_path / "b.txt") as f:
            f.write("x")
    finally:
        os.umask(old)
    assert (tmp_path / "a.txt").stat().st_mode & 0o777 == 0o644
    assert (tmp_path / "b.txt").stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("kind", ["rerank", "encoder"])
def test_hub_models_fail_within_seconds_offline_naming_the_local_alternative(kind, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", "/nonexistent-hf-home")  # nothing cached
    start = time.perf_counter()
    with pytest.raises(DataNotFoundError, match="local"):
        if kind == "rerank":
            from searchgym.retrievers.rerank import Rerank

            Rerank._load("cross-encoder/ms-marco-MiniLM-L-6-v2")  # the Rerank envs' default
        else:
            from searchgym.retrievers.encoders import Encoder

            Encoder("sentence-transformers/all-mpnet-base-v2", device="cpu")  # not converted locally
    assert time.perf_counter() - start < 10


def test_an_unreachable_hub_is_found_out_within_the_connect_timeout(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    with socket.socket() as s:  # a loopback port with nothing listening: refused at once
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    start = time.perf_counter()
    assert hub.local_files_only()
    assert time.perf_counter() - start <= hub.CONNECT_TIMEOUT + 1


def test_a_stuck_dns_lookup_times_out_on_a_daemon_thread(monkeypatch):
    release = threading.Event()
    monkeypatch.setattr(guard, "DNS_TIMEOUT", 0.2)
    monkeypatch.setattr(socket, "getaddrinfo", lambda *a, **k: release.wait(30) and [])
    try:
        with pytest.raises(OSError, match="no answer from DNS within 0.2s"):
            guard.system_resolver("example.org", 443)
        stuck = [t for t in threading.enumerate() if t.name == "searchgym-dns"]
        assert stuck and all(t.daemon for t in stuck)  # the interpreter exits without waiting
    finally:
        release.set()
