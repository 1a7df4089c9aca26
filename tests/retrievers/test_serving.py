"""`loopback_guard`: a server bound to any loopback address (127.0.0.0/8, ::1, localhost) answers
only requests for loopback names and its own address, so a web page cannot reach it by DNS
rebinding; on any other bind it answers every name."""

import httpx
import pytest
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from searchgym.serving import ServerThread, loopback_guard


def app():
    return Starlette(routes=[Route("/", lambda request: PlainTextResponse("ok"))])


@pytest.mark.parametrize(
    "host, own", [("127.0.0.2", "127.0.0.2"), ("::1", "[::1]"), ("localhost", "localhost")]
)
def test_a_server_on_any_loopback_address_answers_only_loopback_names(host, own):
    with ServerThread(loopback_guard(app(), host), host=host) as server:
        port = server.url.rpartition(":")[2]
        for name in (f"{own}:{port}", "localhost", "127.0.0.1"):
            assert httpx.get(server.url, headers={"Host": name}).status_code == 200, name
        refused = httpx.get(server.url, headers={"Host": "attacker.example"})
        assert refused.status_code == 400 and "not 'attacker.example'" in refused.json()["detail"]


def test_other_binds_are_not_guarded():
    served = app()
    assert loopback_guard(served, "0.0.0.0") is served and loopback_guard(served, "10.1.2.3") is served
