"""`SiteServer` serves a site directory on loopback, and nothing outside it."""

import http.client
import os

import httpx
import pytest

from searchgym.errors import DataNotFoundError
from searchgym.retrievers.web.fetch import HttpSource
from searchgym.retrievers.web.page import FetchError
from searchgym.retrievers.web.serve import SiteServer


@pytest.fixture
def site(tmp_path):
    root = tmp_path / "site"
    (root / "wiki").mkdir(parents=True)
    (root / "index.html").write_text("<title>Home</title>", encoding="utf-8")
    (root / "wiki" / "Zürich.html").write_text("<title>Zürich</title><p>Lake</p>", encoding="utf-8")
    (root / "notes.txt").write_text("plain", encoding="utf-8")
    (root / "empty").mkdir()
    (tmp_path / "secret.txt").write_text("outside the site", encoding="utf-8")
    return root


def raw_get(server, path):
    """A GET with the path sent exactly as written (httpx would normalise ``..`` away)."""
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    try:
        connection.putrequest("GET", path, skip_accept_encoding=True)
        connection.endheaders()
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def test_pages_are_served_to_an_http_source_allowed_on_the_port(site):
    with SiteServer(site) as server:
        assert server.base_url == f"http://127.0.0.1:{server.port}/"
        with HttpSource(allow_hosts=[server.host_port]) as source:
            home = source.get(server.base_url)
            assert (home.body, home.content_type) == (b"<title>Home</title>", "text/html")
            page = source.get(server.base_url + "wiki/Z%C3%BCrich.html")
            assert page.body.decode("utf-8") == "<title>Zürich</title><p>Lake</p>"
            assert source.get(server.base_url + "notes.txt").content_type == "text/plain"
            with pytest.raises(FetchError, match="HTTP 404"):
                source.get(server.base_url + "wiki/Nowhere.html")
        with HttpSource() as default, pytest.raises(FetchError, match="^refused .*loopback"):
            default.get(server.base_url)


def test_nothing_outside_the_root_is_served(site, tmp_path):
    (site / "wiki" / "link.html").symlink_to(tmp_path / "secret.txt")
    (site / "escape").symlink_to(tmp_path, target_is_directory=True)
    with SiteServer(site) as server:
        for path in (
            "/../secret.txt",
            "/%2e%2e/secret.txt",
            "/wiki/../../secret.txt",
            "/wiki/%2E%2E%2F%2E%2E%2Fsecret.txt",
            "/wiki/link.html",  # a symlink that leads out
            "/escape/secret.txt",
            "/empty/",  # a directory without an index page: no listing
            "/wiki/",
        ):
            status, body = raw_get(server, path)
            assert status == 404, path
            assert b"outside the site" not in body
        assert raw_get(server, "/wiki/../index.html") == (200, b"<title>Home</title>")


def test_start_is_idempotent_and_close_stops_serving(site):
    server = SiteServer(site)
    base = server.start()
    assert server.start() == base
    port = server.port
    assert httpx.get(base).status_code == 200
    server.close()
    server.close()
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/", timeout=2)
    with pytest.raises(RuntimeError, match="call start"):
        _ = server.port


def test_a_missing_directory_is_a_data_not_found_error(tmp_path):
    with pytest.raises(DataNotFoundError, match="no site directory"):
        SiteServer(tmp_path / "nope")


def test_request_logs_stay_off_stderr(site, capfd):
    with SiteServer(site) as server:
        httpx.get(server.base_url + "missing.html")
    assert capfd.readouterr().err == ""


def test_symlinks_inside_the_root_are_served(site):
    os.symlink(site / "index.html", site / "alias.html")
    with SiteServer(site) as server:
        assert raw_get(server, "/alias.html") == (200, b"<title>Home</title>")
