"""`HttpSource` against real HTTP servers the tests start on loopback: redirects, limits, types,
errors, and the guard and address pinning on every hop."""

import functools
import gzip
import re
import shutil
import ssl
import subprocess
import threading
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import quote, unquote

import httpx
import pytest

from searchgym.errors import ConfigError
from searchgym.retrievers.web import PageSource, RawPage
from searchgym.retrievers.web.fetch import HttpSource
from searchgym.retrievers.web.page import FetchError

PAGE = "<html><head><title>Hello</title></head><body><p>Grüße aus Zürich.</p></body></html>".encode()
CHUNK = 64 * 1024
HUGE = 256 * 1024 * 1024  # what /huge would send if nobody stopped reading


class Handler(BaseHTTPRequestHandler):
    """One route per behaviour a fetcher must cope with; ``self.server.state`` is shared."""

    protocol_version = "HTTP/1.1"

    def do_GET(self):  # noqa: C901 - a route table
        state = self.server.state
        state["requests"].append(self.path)
        path = self.path
        if path in ("/page.html", "/"):
            self.reply(200, PAGE, "text/html; charset=utf-8")
        elif path == "/plain":
            self.reply(200, b"just text", "text/plain")
        elif path == "/xhtml":
            self.reply(200, PAGE, "application/xhtml+xml")
        elif path == "/echo":
            h = self.headers
            lines = f"host={h['Host']}\nua={h['User-Agent']}\ncookie={h['Cookie']}"
            self.reply(200, lines.encode(), "text/plain", ("Set-Cookie", "session=abc"))
        elif path.startswith("/hop/"):
            n = int(path.rsplit("/", 1)[1])
            if n:
                self.redirect(f"/hop/{n - 1}")
            else:
                self.reply(200, PAGE, "text/html; charset=utf-8")
        elif path == "/relative":
            self.redirect("page.html#section")
        elif path.startswith("/to?u="):
            self.redirect(unquote(path[len("/to?u=") :]))
        elif path == "/see-other":
            self.reply(303, b"", "text/html", ("Location", "/plain"))
        elif path == "/slow":
            state["stop"].wait(30)
            self.reply(200, PAGE, "text/html")
        elif path == "/drip":
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            while not state["stop"].wait(0.02):
                if not self.send_bytes(b"x"):
                    break
        elif path == "/huge":
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Connection", "close")
            self.end_headers()
            sent = 0
            while sent < HUGE and self.send_bytes(b"a" * CHUNK):
                sent += CHUNK
            state["huge_sent"] = sent
            state["huge_done"].set()
            self.close_connection = True
        elif path == "/declared-huge":
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(10_000_000))
            self.end_headers()
            self.send_bytes(b"a" * 1000)
            self.close_connection = True
        elif path == "/gzip":
            self.reply(200, gzip.compress(PAGE), "text/html", ("Content-Encoding", "gzip"))
        elif path == "/deflate":
            self.reply(200, zlib.compress(PAGE), "text/html", ("Content-Encoding", "deflate"))
        elif path == "/raw-deflate":
            z = zlib.compressobj(wbits=-zlib.MAX_WBITS)
            self.reply(200, z.compress(PAGE) + z.flush(), "text/html", ("Content-Encoding", "deflate"))
        elif path == "/gzip-bomb":
            self.reply(200, state["bomb"], "text/html", ("Content-Encoding", "gzip"))
        elif path == "/brotli":
            self.reply(200, b"\x0b\x02\x80hello\x03", "text/html", ("Content-Encoding", "br"))
        elif path == "/image":
            self.reply(200, b"\x89PNG\r\n\x1a\n", "image/png")
        elif path == "/json":
            self.reply(200, b"{}", "application/json")
        elif path == "/untyped-text":
            self.reply(200, b"<p>no header</p>", None)
        elif path == "/untyped-binary":
            self.reply(200, b"\x00\x01\x02binary", None)
        elif path == "/missing":
            self.reply(404, b"<h1>Not Found</h1>", "text/html")
        elif path == "/broken":
            self.reply(500, b"<h1>Oops</h1>", "text/html")
        elif path == "/nowhere":
            self.reply(302, b"", "text/html")
        else:
            self.reply(404, b"no route", "text/plain")

    def reply(self, status, body, content_type, *headers):
        self.send_response(status)
        if content_type:
            self.send_header("Content-Type", content_type)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.send_bytes(body)

    def redirect(self, location):
        self.reply(302, b"", "text/html", ("Location", location))

    def send_bytes(self, data):
        try:
            self.wfile.write(data)
            self.wfile.flush()
            return True
        except OSError:  # the client hung up
            self.close_connection = True
            return False

    def log_message(self, *args):
        pass


@functools.cache
def gzip_bomb():
    return gzip.compress(b"\0" * (50 * 1024 * 1024))


def start_server(handler=Handler):
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    server.state = {
        "requests": [],
        "stop": threading.Event(),
        "huge_done": threading.Event(),
        "bomb": gzip_bomb(),
    }
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def stop_server(server):
    server.state["stop"].set()
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def server():
    running = start_server()
    yield running
    stop_server(running)


@pytest.fixture(scope="module")
def other_server():
    running = start_server()
    yield running
    stop_server(running)


def host_port(server):
    return f"127.0.0.1:{server.server_address[1]}"


def url(server, path):
    return f"http://{host_port(server)}{path}"


@pytest.fixture
def source(server):
    with HttpSource(allow_hosts=[host_port(server)], timeout=5.0) as fetcher:
        yield fetcher


def test_a_page_comes_back_as_bytes_with_its_content_type(source, server):
    assert isinstance(source, PageSource)
    page = source.get(url(server, "/page.html"))
    assert page == RawPage(url(server, "/page.html"), PAGE, "text/html; charset=utf-8")
    assert source.get(url(server, "/plain")).body == b"just text"
    assert source.get(url(server, "/xhtml")).content_type == "application/xhtml+xml"


def test_loopback_is_refused_unless_allowed_and_nothing_connects(server):
    before = len(server.state["requests"])
    with HttpSource() as default, pytest.raises(FetchError, match="^refused .*loopback"):
        default.get(url(server, "/page.html"))
    with (
        HttpSource(allow_hosts=[f"127.0.0.1:{server.server_address[1] + 1}"]) as other_port,
        pytest.raises(FetchError, match="^refused"),
    ):
        other_port.get(url(server, "/page.html"))
    assert len(server.state["requests"]) == before  # refused before any connection
    with HttpSource(allow_hosts=["127.0.0.1"]) as any_port:  # a bare host allows every port
        assert any_port.get(url(server, "/page.html")).body == PAGE


def test_redirects_are_followed_up_to_the_limit(source, server):
    page = source.get(url(server, "/hop/5"))
    assert page == RawPage(url(server, "/hop/0"), PAGE, "text/html; charset=utf-8")
    assert source.get(url(server, "/relative")).url == url(server, "/page.html#section")
    assert source.get(url(server, "/see-other")).body == b"just text"
    before = len(server.state["requests"])
    with pytest.raises(FetchError, match=r"redirects more than 5 times"):
        source.get(url(server, "/hop/6"))
    assert len(server.state["requests"]) - before == 6  # the first request and five redirects
    with (
        HttpSource(allow_hosts=[host_port(server)], max_redirects=0) as strict,
        pytest.raises(FetchError, match="more than 0 times"),
    ):
        strict.get(url(server, "/hop/1"))
    with pytest.raises(FetchError, match="HTTP 302 .* redirects nowhere"):
        source.get(url(server, "/nowhere"))
    with pytest.raises(FetchError, match="redirects to a malformed URL 'http://\\[::1'"):
        source.get(url(server, "/to?u=http%3A%2F%2F%5B%3A%3A1"))


def test_every_redirect_hop_passes_the_guard(server, other_server):
    resolver = {"evil.example": "10.0.0.1", "meta.example": "169.254.169.254"}.__getitem__
    with HttpSource(allow_hosts=[host_port(server)], resolver=lambda h, p: [resolver(h)]) as source:
        for target, why in [
            ("http://evil.example/", "evil.example resolves to 10.0.0.1, which is a private address"),
            ("http://meta.example/latest/meta-data/", "link-local"),
            ("http://169.254.169.254/latest/meta-data/", "link-local"),
            ("http://[::ffff:127.0.0.1]/", "loopback"),
            (url(other_server, "/page.html"), "loopback"),  # loopback, but not the allowed port
        ]:
            with pytest.raises(FetchError, match=f"^refused {re.escape(target)}: .*{why}"):
                source.get(url(server, f"/to?u={quote(target, safe='')}"))
        with pytest.raises(FetchError, match="^refused file:.*only http and https"):
            source.get(url(server, "/to?u=file:///etc/passwd"))
    assert other_server.state["requests"] == []


def test_connections_go_to_the_checked_address_with_the_real_host_header(server):
    """Pinning: the name is looked up once, by the guard, and the request goes to that address."""
    port = server.server_address[1]
    lookups = []

    def resolve(host, p):
        lookups.append(host)
        return ["127.0.0.1"]

    with HttpSource(allow_hosts=[f"site.test:{port}"], resolver=resolve, user_agent="probe/1") as source:
        page = source.get(f"http://site.test:{port}/echo")
        again = source.get(f"http://site.test:{port}/echo")  # a cookie set by the site is not kept
    assert page.url == f"http://site.test:{port}/echo"
    assert page.body.decode() == f"host=site.test:{port}\nua=probe/1\ncookie=None"
    assert again.body == page.body
    assert lookups == ["site.test", "site.test"]


def test_a_rebinding_name_cannot_redirect_the_connection():
    """A name that answers a public address to the check and a private one afterwards: the request
    still goes to the address that was checked (recorded by a fake network)."""
    answers = iter([["93.184.215.14"], ["127.0.0.1"]])
    seen = []

    def network(request):
        seen.append((request.url.host, request.headers["host"], request.extensions.get("sni_hostname")))
        return httpx.Response(200, headers={"Content-Type": "text/html"}, stream=httpx.ByteStream(PAGE))

    source = HttpSource(resolver=lambda h, p: next(answers), transport=httpx.MockTransport(network))
    assert source.get("https://rebind.example/a").body == PAGE
    assert seen == [("93.184.215.14", "rebind.example", "rebind.example")]


def test_a_name_that_resolves_privately_is_refused_before_the_network_is_touched():
    def network(request):
        raise AssertionError(f"connected to {request.url}")

    for address in (
        "10.0.0.1",
        "172.16.0.5",
        "192.168.0.9",
        "169.254.169.254",
        "::1",
        "::ffff:127.0.0.1",
        "100.64.1.1",
    ):
        source = HttpSource(resolver=lambda h, p, a=address: [a], transport=httpx.MockTransport(network))
        with pytest.raises(FetchError, match="^refused"):
            source.get("http://evil.example/")


def test_a_slow_server_times_out(server):
    with HttpSource(allow_hosts=[host_port(server)], timeout=0.3) as source:
        with pytest.raises(FetchError, match=r"timed out after 0.3s"):
            source.get(url(server, "/slow"))
        # a server that keeps sending a byte at a time never trips a per-read timeout, but the
        # whole fetch is bounded
        with pytest.raises(FetchError, match=r"timed out after 0.3s \(reading the page\)"):
            source.get(url(server, "/drip"))


def test_a_huge_body_stops_reading_at_the_cap(source, server):
    with (
        HttpSource(allow_hosts=[host_port(server)], max_bytes=100_000) as small,
        pytest.raises(FetchError, match="page larger than 100000 bytes"),
    ):
        small.get(url(server, "/huge"))
    assert server.state["huge_done"].wait(30), "the server never noticed the client leave"
    # the server could write only what the socket buffers held before the client hung up
    assert server.state["huge_sent"] < 32 * 1024 * 1024 < HUGE
    with pytest.raises(FetchError, match=r"larger than 2000000 bytes; not read \(Content-Length 10000000\)"):
        source.get(url(server, "/declared-huge"))


def test_compressed_bodies_are_inflated_within_the_cap(source, server):
    for path in ("/gzip", "/deflate", "/raw-deflate"):
        assert source.get(url(server, path)).body == PAGE
    with pytest.raises(FetchError, match="page larger than 2000000 bytes"):
        source.get(url(server, "/gzip-bomb"))  # 50 MB of zeros in about 50 KB
    with pytest.raises(FetchError, match="Content-Encoding 'br'"):
        source.get(url(server, "/brotli"))


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/image", "is image/png, not a web page"),
        ("/json", "is application/json, not a web page"),
        ("/untyped-binary", "binary data without a Content-Type"),
        ("/missing", "HTTP 404 Not Found from http://127.0.0.1:"),
        ("/broken", "HTTP 500 Internal Server Error from"),
    ],
)
def test_wrong_types_and_http_errors_are_readable_fetch_errors(source, server, path, message):
    with pytest.raises(FetchError, match=message):
        source.get(url(server, path))


def test_a_page_without_content_type_is_read_as_text(source, server):
    assert source.get(url(server, "/untyped-text")) == RawPage(
        url(server, "/untyped-text"), b"<p>no header</p>", ""
    )


def test_a_closed_port_is_a_fetch_error(server):
    closed = start_server()
    port = closed.server_address[1]
    stop_server(closed)
    with (
        HttpSource(allow_hosts=[f"127.0.0.1:{port}"]) as source,
        pytest.raises(FetchError, match=f"could not connect to http://127.0.0.1:{port}/"),
    ):
        source.get(f"http://127.0.0.1:{port}/")


@pytest.mark.parametrize(
    "kwargs", [{"timeout": 0}, {"max_bytes": 0}, {"max_redirects": -1}, {"allow_hosts": "127.0.0.1"}]
)
def test_bad_settings_are_config_errors(kwargs):
    with pytest.raises(ConfigError):
        HttpSource(**kwargs)


# --- https: the pinned connection still checks the certificate against the name -------------


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory):
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is needed to make a test certificate")
    directory = tmp_path_factory.mktemp("tls")
    key, cert = directory / "key.pem", directory / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-keyout", str(key),
         "-out", str(cert), "-subj", "/CN=pinned.test", "-addext", "subjectAltName=DNS:pinned.test"],
        check=True, capture_output=True,
    )  # fmt: skip
    return key, cert


@pytest.fixture(scope="module")
def tls_server(tls_files):
    key, cert = tls_files
    running = start_server()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    running.socket = context.wrap_socket(running.socket, server_side=True)
    yield running
    stop_server(running)


def test_https_to_a_pinned_address_verifies_the_certificate_for_the_name(tls_server, tls_files):
    port = tls_server.server_address[1]
    trust = ssl.create_default_context(cafile=str(tls_files[1]))
    allow = [f"pinned.test:{port}", f"impostor.test:{port}"]
    with HttpSource(allow_hosts=allow, resolver=lambda h, p: ["127.0.0.1"], verify=trust) as source:
        page = source.get(f"https://pinned.test:{port}/echo")
        assert page.body.startswith(f"host=pinned.test:{port}\n".encode())
        # same address, but the certificate does not name this host: refused by TLS
        with pytest.raises(FetchError, match="impostor.test"):
            source.get(f"https://impostor.test:{port}/echo")
    with (
        HttpSource(allow_hosts=allow, resolver=lambda h, p: ["127.0.0.1"]) as untrusting,
        pytest.raises(FetchError, match="CERTIFICATE_VERIFY_FAILED|certificate verify failed"),
    ):
        untrusting.get(f"https://pinned.test:{port}/echo")
