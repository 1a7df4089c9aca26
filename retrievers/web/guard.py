"""The address guard: which URLs a live fetch may reach, and the address it must connect to.

An agent chooses the URLs it opens, and a page chooses where it redirects, so a fetcher that
follows them blindly can be steered at the machine's own services (server-side request forgery):
``http://127.0.0.1:8000/admin``, a database on the private network, or the cloud metadata
endpoint at ``169.254.169.254`` that hands out credentials. `AddressGuard.check` refuses:

- schemes other than http and https, and URLs with userinfo (``http://user:pass@host/``);
- names that only mean something inside a network: ``localhost`` and ``*.localhost``,
  ``*.local``, ``*.internal`` (``metadata.google.internal``), ``*.home.arpa``, and one-label names
  such as ``metadata`` that a resolver's search domains turn into internal hosts;
- numeric hosts that are not a plain dotted quad (``2130706433``, ``0x7f.1``, ``127.1``), which
  C resolvers read as IPv4 addresses;
- a host if ANY of its addresses is loopback, private (RFC 1918, ``fc00::/7``), link-local
  (``169.254.0.0/16`` with the metadata endpoint, ``fe80::/10``), unspecified, multicast,
  reserved, shared (CGNAT ``100.64.0.0/10``), IETF-assigned (``192.0.0.0/24``), site-local
  (``fec0::/10``) or otherwise not global, including IPv4 addresses wrapped in IPv6
  (``::ffff:127.0.0.1``, 6to4, Teredo, NAT64).

Hosts in ``allow_hosts`` (``"host"`` for any port, ``"host:port"`` for one) skip the name and
address checks, and only those hosts: allowing ``127.0.0.1:8000`` allows neither ``localhost:8000``
nor ``127.0.0.1:8001``. Ports are not restricted: the addresses decide what is reachable, and a
public host's other ports are as public as its port 80.

The check returns the addresses it approved; the fetcher connects to those and no others (it
pins them), so a name that resolves to a public address when checked and to ``127.0.0.1`` when
connecting (DNS rebinding) cannot slip through. Resolution is a plain function of ``(host, port)``
so tests can make ``evil.example`` resolve to ``10.0.0.1`` without DNS.
"""

from __future__ import annotations

import ipaddress
import re
import socket
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import httpx

from searchgym.errors import ConfigError
from searchgym.retrievers.web.page import FetchError

Resolver = Callable[[str, int], Sequence[str]]
"""``(host, port) -> IP address strings``; raises `OSError` when the name does not resolve."""

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_INTERNAL_SUFFIXES = (".localhost", ".local", ".internal", ".home.arpa")
_EXTRA_BLOCKED = tuple(
    ipaddress.ip_network(n)
    for n in ("100.64.0.0/10", "192.0.0.0/24", "198.18.0.0/15", "fec0::/10", "64:ff9b:1::/48")
)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_NUMERIC_LABEL = re.compile(r"^(0x[0-9a-f]*|[0-9]+)$")


DNS_TIMEOUT = 5.0
"""Seconds `system_resolver` waits for an answer; the C resolver's own retries can take 30."""
_DNS_SLOTS = threading.BoundedSemaphore(4)  # lookups at once; a stuck one holds its slot


def system_resolver(host: str, port: int) -> list[str]:
    """Every address ``getaddrinfo`` gives for ``host`` (IPv4 and IPv6), in its order, within
    `DNS_TIMEOUT` seconds. ``getaddrinfo`` cannot be interrupted, so it runs on a daemon thread
    that is left to finish on its own when the wait is over (and never holds up exit)."""
    if not _DNS_SLOTS.acquire(timeout=DNS_TIMEOUT):
        raise OSError(f"no DNS lookup slot free within {DNS_TIMEOUT:g}s")
    answer: list = []
    done = threading.Event()

    def lookup() -> None:
        try:
            answer.append(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
        except OSError as e:
            answer.append(e)
        finally:
            _DNS_SLOTS.release()
            done.set()

    threading.Thread(target=lookup, name="searchgym-dns", daemon=True).start()
    if not done.wait(DNS_TIMEOUT):
        raise OSError(f"no answer from DNS within {DNS_TIMEOUT:g}s")
    if isinstance(answer[0], OSError):
        raise answer[0]
    return list(dict.fromkeys(str(info[4][0]) for info in answer[0]))


@dataclass(frozen=True)
class Checked:
    """A URL the guard approved: connect to ``addresses`` (in order) and send ``host_header``;
    ``hostname`` is the ASCII host a TLS certificate must name."""

    url: httpx.URL
    hostname: str
    port: int
    host_header: str
    addresses: tuple[str, ...]


def blocked_reason(address: IPAddress) -> str | None:
    """Why a fetch may not connect to ``address`` (``"a private address"``), or None if it may.

    >>> blocked_reason(ipaddress.ip_address("169.254.169.254"))
    'a link-local (cloud metadata) address'
    >>> blocked_reason(ipaddress.ip_address("::ffff:10.0.0.1"))
    'a private address (10.0.0.1 inside IPv6)'
    >>> blocked_reason(ipaddress.ip_address("93.184.215.14")) is None
    True
    """
    if isinstance(address, ipaddress.IPv6Address):
        inner = address.ipv4_mapped or (_nat64(address) if address in _NAT64 else None)
        if inner is not None:  # only a wrapper: the IPv4 address inside decides
            reason = blocked_reason(inner)
            return f"{reason} ({inner} inside IPv6)" if reason else None
        for inner in (address.sixtofour, *(address.teredo or ())):
            reason = blocked_reason(inner) if inner is not None else None
            if reason:
                return f"{reason} ({inner} inside IPv6)"
    checks = (
        ("loopback", address.is_loopback),
        ("unspecified", address.is_unspecified),
        ("link-local (cloud metadata)", address.is_link_local),
        ("multicast", address.is_multicast),
        ("reserved", address.is_reserved),
        ("private", address.is_private),
        ("shared or special-purpose", any(address in net for net in _EXTRA_BLOCKED)),
        ("non-public", not address.is_global),
    )
    name = next((name for name, hit in checks if hit), None)
    return f"{_article(name)} {name} address" if name else None


def _nat64(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address:
    return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)


def _parse_allow(entry: str) -> tuple[str, int | None]:
    """``"host"``, ``"host:port"``, ``"[v6]:port"`` or a bare IPv6 address -> (host, port)."""
    text = entry.strip().lower()
    host, port = text, None
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else (rest or None)
    elif text.count(":") == 1:
        host, port = text.split(":")
    if "/" in text or "@" in text or not host or (port is not None and not str(port).isdigit()):
        raise ConfigError(
            f"allow_hosts entry {entry!r} is not a host or host:port (e.g. '127.0.0.1:8000', 'example.org')"
        )
    return host.rstrip("."), None if port is None else int(port)


class AddressGuard:
    """Approve URLs for a live fetch; see the module docstring for what is refused and why.

    >>> guard = AddressGuard(resolver=lambda host, port: ["10.0.0.1"])
    >>> try:
    ...     guard.check("http://evil.example/")
    ... except FetchError as e:
    ...     print(e)
    refused http://evil.example/: evil.example resolves to 10.0.0.1, which is a private address
    >>> AddressGuard(["evil.example"], resolver=lambda host, port: ["10.0.0.1"]).check(
    ...     "http://evil.example/").addresses
    ('10.0.0.1',)
    """

    def __init__(self, allow_hosts: Iterable[str] = (), *, resolver: Resolver | None = None) -> None:
        if isinstance(allow_hosts, str):
            raise ConfigError(f"allow_hosts takes a list of hosts, e.g. [{allow_hosts!r}], not a string")
        self.allow_hosts = frozenset(_parse_allow(entry) for entry in allow_hosts)
        self.resolver = resolver or system_resolver

    def allowed(self, host: str, port: int) -> bool:
        """Whether ``host:port`` is exempt from the name and address checks."""
        return (host, port) in self.allow_hosts or (host, None) in self.allow_hosts

    def check(self, url: str | httpx.URL) -> Checked:
        """Approve ``url`` and return where to connect, or raise `FetchError` saying why not.
        Nothing is connected to; the only network use is the name lookup."""
        try:
            parsed = httpx.URL(url)
        except (httpx.InvalidURL, TypeError, UnicodeError) as e:
            raise FetchError(f"refused {url}: not a valid URL ({e})") from e
        if parsed.scheme not in ("http", "https"):
            raise FetchError(f"refused {url}: only http and https URLs can be opened")
        if parsed.userinfo:
            raise FetchError(f"refused {url}: URLs with a user name or password are not opened")
        hostname = parsed.raw_host.decode("ascii").lower()
        if not hostname:
            raise FetchError(f"refused {url}: the URL has no host")
        host = hostname.rstrip(".")
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
        allowed, literal = self.allowed(host, port), _ip_literal(host)
        if literal is not None:
            addresses = [literal]
        else:
            if not allowed:
                self._check_name(url, host)
            addresses = [_parse_ip(url, a) for a in self._resolve(url, hostname, port)]
        for address in [] if allowed else addresses:
            reason = blocked_reason(address)
            if reason:
                where = f"{host} is" if literal else f"{host} resolves to {address}, which is"
                raise FetchError(f"refused {url}: {where} {reason}")
        pinned = tuple(dict.fromkeys(str(getattr(a, "ipv4_mapped", None) or a) for a in addresses))
        return Checked(parsed, hostname, port, parsed.netloc.decode("ascii"), pinned)

    @staticmethod
    def _check_name(url: object, host: str) -> None:
        labels = host.split(".")
        if _NUMERIC_LABEL.match(labels[-1]):
            raise FetchError(f"refused {url}: {host} is a numeric host but not a dotted-quad IPv4 address")
        if host == "localhost" or host.endswith(_INTERNAL_SUFFIXES):
            raise FetchError(f"refused {url}: {host} names a host inside a local network")
        if len(labels) == 1:
            raise FetchError(f"refused {url}: {host} is a one-label name, which names a local host")

    def _resolve(self, url: object, host: str, port: int) -> list[str]:
        try:
            addresses = list(self.resolver(host, port))
        except (OSError, UnicodeError) as e:
            raise FetchError(f"could not open {url}: the name {host} does not resolve ({e})") from e
        if not addresses:
            raise FetchError(f"could not open {url}: the name {host} has no address")
        return addresses


def _article(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"


def _ip_literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def _parse_ip(url: object, text: str) -> IPAddress:
    try:
        return ipaddress.ip_address(text)
    except ValueError as e:  # a resolver bug, but refuse rather than connect somewhere unknown
        raise FetchError(f"refused {url}: the resolver gave {text!r}, which is not an IP address") from e
