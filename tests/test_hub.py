"""`searchgym.hub`: hub loads fail within seconds offline and name the local alternative, and an
unreachable hub is found out within the connect timeout."""

from __future__ import annotations

import socket
import time

import pytest

from searchgym import hub
from searchgym.errors import DataNotFoundError


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
