"""The address guard refuses what a live fetch must never reach, before anything connects."""

import socket
import threading

import pytest

from searchgym.errors import ConfigError
from searchgym.retrievers.web import guard as guard_module
from searchgym.retrievers.web.guard import AddressGuard
from searchgym.retrievers.web.page import FetchError


def resolver_of(table):
    """A resolver over a dict, recording every lookup; unknown names fail like DNS does."""

    def resolve(host, port):
        resolve.calls.append((host, port))
        if host not in table:
            raise OSError(f"[Errno -2] Name or service not known: {host}")
        value = table[host]
        return value if isinstance(value, list) else [value]

    resolve.calls = []
    return resolve


def no_lookup(host, port):
    raise AssertionError(f"the guard looked up {host}; it should have refused first")


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("10.0.0.1", "private"),
        ("172.16.5.4", "private"),
        ("192.168.1.1", "private"),
        ("169.254.169.254", "link-local"),  # the cloud metadata endpoint
        ("127.0.0.1", "loopback"),
        ("::1", "loopback"),
        ("::ffff:127.0.0.1", "loopback"),  # IPv4-mapped IPv6
        ("::ffff:169.254.169.254", "link-local"),
        ("100.64.0.1", "shared"),  # carrier-grade NAT
        ("100.100.100.200", "shared"),  # Alibaba Cloud's metadata endpoint lies in it
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("fe80::1", "link-local"),
        ("fc00::1", "private"),
        ("fd00:ec2::254", "private"),  # AWS's IPv6 metadata endpoint
        ("224.0.0.1", "multicast"),
        ("ff02::1", "multicast"),
        ("240.0.0.1", "reserved"),
        ("192.0.0.192", "special-purpose"),  # Oracle Cloud's metadata endpoint
        ("2002:a00:1::", "private"),  # 6to4 wrapping 10.0.0.1
        ("64:ff9b::a9fe:a9fe", "link-local"),  # NAT64 wrapping 169.254.169.254
        ("fec0::1", "special-purpose"),  # deprecated site-local
    ],
)
def test_names_resolving_to_non_public_addresses_are_refused_before_connecting(address, kind):
    guard = AddressGuard(resolver=resolver_of({"evil.example": address}))
    with pytest.raises(FetchError, match=rf"^refused http://evil\.example/x: .*{kind}"):
        guard.check("http://evil.example/x")
    with pytest.raises(FetchError, match=f"refused .*{kind}"):  # the same address written in the URL
        AddressGuard(resolver=no_lookup).check(
            f"http://[{address}]/" if ":" in address else f"http://{address}/"
        )


def test_one_bad_address_among_good_ones_is_enough_to_refuse():
    guard = AddressGuard(resolver=resolver_of({"mixed.example": ["93.184.215.14", "10.0.0.1"]}))
    with pytest.raises(FetchError, match="resolves to 10.0.0.1, which is a private address"):
        guard.check("https://mixed.example/")


@pytest.mark.parametrize(
    "url",
    [
        "http://localhost:8000/",
        "http://LOCALHOST./",
        "http://api.localhost/",
        "http://metadata.google.internal/computeMetadata/v1/",
        "http://printer.local/",
        "http://router.home.arpa/",
        "http://metadata/",  # one-label names resolve through search domains
        "http://intranet/",
        "http://2130706433/",  # 127.0.0.1 as one number
        "http://0x7f.1/",
        "http://127.1/",
        "http://0177.0.0.1/",
    ],
)
def test_local_names_and_odd_numeric_hosts_are_refused_without_a_lookup(url):
    with pytest.raises(FetchError, match="^refused"):
        AddressGuard(resolver=no_lookup).check(url)


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("file:///etc/passwd", "only http and https"),
        ("ftp://example.org/file", "only http and https"),
        ("gopher://example.org/", "only http and https"),
        ("javascript:alert(1)", "only http and https"),
        ("http://user:secret@example.org/", "user name or password"),
        ("/relative/path", "only http and https"),
    ],
)
def test_other_schemes_and_credentials_in_urls_are_refused(url, why):
    with pytest.raises(FetchError, match=why):
        AddressGuard(resolver=no_lookup).check(url)


def test_public_hosts_pass_with_every_address_pinned_for_the_connection():
    resolve = resolver_of({"example.org": ["93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c"]})
    checked = AddressGuard(resolver=resolve).check("https://Example.org/wiki/Page?q=1#top")
    assert checked.addresses == ("93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c")
    assert (checked.hostname, checked.port, checked.host_header) == ("example.org", 443, "example.org")
    assert resolve.calls == [("example.org", 443)]
    checked = AddressGuard(resolver=resolve).check("http://example.org:8080/")
    assert (checked.port, checked.host_header) == (8080, "example.org:8080")
    # an IPv4-mapped public address is connected to as plain IPv4
    mapped = AddressGuard(resolver=resolver_of({"m.example": "::ffff:93.184.215.14"})).check(
        "http://m.example/"
    )
    assert mapped.addresses == ("93.184.215.14",)
    # so is a NAT64 address of a public host (IPv6-only networks with DNS64); it stays IPv6
    nat64 = AddressGuard(resolver=resolver_of({"n.example": "64:ff9b::5db8:d70e"})).check("http://n.example/")
    assert nat64.addresses == ("64:ff9b::5db8:d70e",)
    # an internationalised name is looked up, sent and verified in its ASCII form
    idn = AddressGuard(resolver=resolver_of({"xn--bcher-kva.example": "93.184.215.14"})).check(
        "http://bücher.example/"
    )
    assert (idn.hostname, idn.host_header) == ("xn--bcher-kva.example", "xn--bcher-kva.example")


def test_allow_hosts_exempts_exactly_the_listed_hosts_and_ports():
    resolve = resolver_of({"intranet.example": "10.1.2.3", "localhost": "127.0.0.1"})
    guard = AddressGuard(["127.0.0.1:8000", "intranet.example", "[::1]:9000"], resolver=resolve)
    assert guard.check("http://127.0.0.1:8000/a").addresses == ("127.0.0.1",)
    assert guard.check("http://intranet.example:1234/").addresses == ("10.1.2.3",)
    assert guard.check("https://intranet.example/").addresses == ("10.1.2.3",)
    assert guard.check("http://[::1]:9000/").addresses == ("::1",)
    for url in (
        "http://127.0.0.1:8001/",
        "http://127.0.0.1/",
        "http://localhost:8000/",
        "http://[::1]:9001/",
    ):
        with pytest.raises(FetchError, match="^refused"):
            guard.check(url)
    assert AddressGuard(["127.0.0.1:80"], resolver=no_lookup).check("http://127.0.0.1/").port == 80


@pytest.mark.parametrize("entry", ["http://127.0.0.1:8000", "127.0.0.1:port", "", "a@b", "[::1]:x"])
def test_malformed_allow_host_entries_are_config_errors(entry):
    with pytest.raises(ConfigError, match="host:port"):
        AddressGuard([entry])


def test_a_single_string_for_allow_hosts_is_a_config_error():
    with pytest.raises(ConfigError, match="list of hosts"):
        AddressGuard("127.0.0.1:8000")


def test_names_that_do_not_resolve_are_fetch_errors():
    with pytest.raises(FetchError, match="does not resolve"):
        AddressGuard(resolver=resolver_of({})).check("http://nowhere.example/")
    with pytest.raises(FetchError, match="has no address"):
        AddressGuard(resolver=lambda host, port: []).check("http://empty.example/")


def test_a_dns_lookup_that_hangs_is_a_fetch_error_after_the_dns_timeout(monkeypatch):
    release = threading.Event()

    def hanging_getaddrinfo(*args, **kwargs):
        release.wait(10)
        raise OSError("released")

    monkeypatch.setattr(guard_module.socket, "getaddrinfo", hanging_getaddrinfo)
    monkeypatch.setattr(guard_module, "DNS_TIMEOUT", 0.2)
    try:
        expected = r"the name slow\.example does not resolve \(no answer from DNS within 0\.2s\)"
        with pytest.raises(FetchError, match=expected):
            AddressGuard().check("http://slow.example/")
    finally:
        release.set()


def test_a_stuck_dns_lookup_times_out_on_a_daemon_thread(monkeypatch):
    release = threading.Event()
    monkeypatch.setattr(guard_module, "DNS_TIMEOUT", 0.2)
    monkeypatch.setattr(socket, "getaddrinfo", lambda *a, **k: release.wait(30) and [])
    try:
        with pytest.raises(OSError, match="no answer from DNS within 0.2s"):
            guard_module.system_resolver("example.org", 443)
        stuck = [t for t in threading.enumerate() if t.name == "searchgym-dns"]
        assert stuck and all(t.daemon for t in stuck)  # the interpreter exits without waiting
    finally:
        release.set()
