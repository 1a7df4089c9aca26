"""`HttpSource`: a `PageSource` over live HTTP, for agents that browse the real web.

Every URL, the first and each redirect's, passes the `AddressGuard` (see guard.py) before any
connection, and the connection goes to the address the guard approved, never to a second lookup
of the name: the request is sent to that IP with the real ``Host`` header and, for https, the real
name as SNI and as the name the certificate must carry. Redirects are followed by hand for that
reason, at most ``max_redirects`` of them.

Limits, each a `FetchError` an agent can read (nothing is truncated silently):

- ``timeout`` bounds the whole fetch, redirects included (checked between reads; one blocked
  read waits at most what is left). Name lookup runs before and is bounded only by the system.
- ``max_bytes`` bounds the body after decompression; reading stops as soon as it is passed
  ("page larger than N bytes"), and a larger Content-Length is refused before reading. Only
  gzip and deflate are accepted as encodings, inflated in bounded steps, so a small compressed
  body cannot expand to gigabytes in memory.
- Content-Type must be text/html, application/xhtml+xml or text/plain; a missing header is read
  as text unless the body starts with binary (a NUL byte in its first KiB).

The body is returned as bytes with the Content-Type header; decoding the charset is extraction's
job. Proxy variables (``HTTP_PROXY``...) are ignored: a proxy would resolve names itself and
undo the pinning. Cookies are neither stored nor sent.
"""

from __future__ import annotations

import logging
import ssl
import time
import zlib
from collections.abc import Iterable

import httpx

from searchgym.errors import ConfigError
from searchgym.retrievers.web.guard import AddressGuard, Checked, Resolver
from searchgym.retrievers.web.page import FetchError, RawPage

logger = logging.getLogger(__name__)

TEXT_TYPES = ("text/html", "application/xhtml+xml", "text/plain")
REDIRECTS = (301, 302, 303, 307, 308)
DEFAULT_USER_AGENT = "Mozilla/5.0 (compatible; searchgym web agent)"
_ACCEPT = "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.1"


class HttpSource:
    """Fetch pages over HTTP(S) behind the address guard.

    ``allow_hosts`` lists hosts (``"127.0.0.1:8000"``, ``"intranet.example"``) that may be
    reached even though their addresses are private or local; ``resolver`` replaces DNS
    (tests); ``verify`` is httpx's TLS setting (an `ssl.SSLContext` or False);
    ``transport`` replaces the network (tests). Close it, or use it as a context manager.
    """

    def __init__(
        self,
        *,
        allow_hosts: Iterable[str] = (),
        timeout: float = 10.0,
        max_bytes: int = 2_000_000,
        max_redirects: int = 5,
        user_agent: str = DEFAULT_USER_AGENT,
        resolver: Resolver | None = None,
        verify: ssl.SSLContext | bool = True,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if not timeout > 0 or max_bytes < 1 or max_redirects < 0:
            raise ConfigError(
                f"need timeout > 0, max_bytes >= 1, max_redirects >= 0; "
                f"got {timeout}, {max_bytes}, {max_redirects}"
            )
        self.guard = AddressGuard(allow_hosts, resolver=resolver)
        self.timeout, self.max_bytes, self.max_redirects = timeout, max_bytes, max_redirects
        self.user_agent = user_agent
        # one connection per request: a pooled connection verified for one name would otherwise
        # carry a request for another name that shares its address
        self._transport = transport or httpx.HTTPTransport(
            verify=verify, limits=httpx.Limits(max_keepalive_connections=0), retries=0
        )

    def get(self, url: str) -> RawPage:
        deadline = time.monotonic() + self.timeout
        current = url
        for _ in range(self.max_redirects + 1):
            target = self.guard.check(current)
            response = self._send(target, deadline)
            try:
                if response.status_code in REDIRECTS:
                    location = response.headers.get("location", "").strip()
                    if not location:
                        raise FetchError(f"HTTP {response.status_code} from {target.url} redirects nowhere")
                    try:
                        current = str(target.url.join(location))
                    except httpx.InvalidURL as e:
                        raise FetchError(f"{target.url} redirects to a malformed URL {location!r}") from e
                    logger.debug("%s redirects to %s", target.url, current)
                    continue
                self._check_status(target, response)
                content_type = response.headers.get("content-type", "")
                _check_type(target.url, content_type)
                body = self._read(target, response, deadline)
            finally:
                response.close()
            if not content_type and b"\0" in body[:1024]:
                raise FetchError(f"{target.url} sent binary data without a Content-Type, not a page")
            return RawPage(str(target.url), body, content_type)
        raise FetchError(f"{url} redirects more than {self.max_redirects} times; not followed further")

    def close(self) -> None:
        self._transport.close()

    def __enter__(self) -> HttpSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _send(self, target: Checked, deadline: float) -> httpx.Response:
        """Send the GET to each approved address in turn until one connects."""
        headers = {
            "Host": target.host_header,
            "User-Agent": self.user_agent,
            "Accept": _ACCEPT,
            "Accept-Encoding": "gzip, deflate",
        }
        failures = []
        for address in target.addresses:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            extensions: dict = {"timeout": httpx.Timeout(remaining).as_dict()}
            if target.url.scheme == "https":
                extensions["sni_hostname"] = target.hostname
            try:
                pinned = target.url.copy_with(host=address, fragment=None)
                request = httpx.Request("GET", pinned, headers=headers, extensions=extensions)
                return self._transport.handle_request(request)
            except httpx.InvalidURL as e:  # e.g. an IPv6 address with a zone id
                failures.append(f"{address}: {e}")
            except httpx.TimeoutException as e:
                raise FetchError(f"{target.url} timed out after {self.timeout:g}s") from e
            except httpx.ConnectError as e:
                failures.append(f"{address}: {e}")
            except httpx.HTTPError as e:
                raise FetchError(f"could not fetch {target.url}: {type(e).__name__}: {e}") from e
        if not failures:
            raise FetchError(f"{target.url} timed out after {self.timeout:g}s")
        raise FetchError(f"could not connect to {target.url} ({'; '.join(failures)})")

    @staticmethod
    def _check_status(target: Checked, response: httpx.Response) -> None:
        status = response.status_code
        if status >= 300:
            reason = httpx.codes.get_reason_phrase(status) or "error"
            raise FetchError(f"HTTP {status} {reason} from {target.url}")

    def _read(self, target: Checked, response: httpx.Response, deadline: float) -> bytes:
        """The decoded body, read until done, too large or past the deadline."""
        too_large = f"{target.url}: page larger than {self.max_bytes} bytes; not read"
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_bytes:
            raise FetchError(f"{too_large} (Content-Length {declared})")
        inflate = _Inflater(target.url, response.headers.get("content-encoding", ""))
        body, raw = bytearray(), 0
        try:
            for chunk in response.iter_raw():
                raw += len(chunk)
                body += inflate.feed(chunk, self.max_bytes - len(body))
                if len(body) > self.max_bytes or raw > self.max_bytes:
                    raise FetchError(too_large)
                if time.monotonic() > deadline:
                    raise FetchError(f"{target.url} timed out after {self.timeout:g}s (reading the page)")
        except httpx.TimeoutException as e:
            raise FetchError(f"{target.url} timed out after {self.timeout:g}s (reading the page)") from e
        except httpx.HTTPError as e:
            raise FetchError(f"could not read {target.url}: {type(e).__name__}: {e}") from e
        body += inflate.flush()
        if len(body) > self.max_bytes:
            raise FetchError(too_large)
        return bytes(body)


def _check_type(url: httpx.URL, content_type: str) -> None:
    media = content_type.split(";")[0].strip().lower()
    if media and media not in TEXT_TYPES:
        raise FetchError(f"{url} is {media}, not a web page (text/html, application/xhtml+xml or text/plain)")


class _Inflater:
    """Undo a Content-Encoding in bounded steps: ``feed`` never returns more than ``room + 1``
    bytes whatever the compression ratio, so the caller sees an oversized body at once (and
    stops; input left unconsumed is only ever left behind an oversized body)."""

    def __init__(self, url: httpx.URL, encoding: str) -> None:
        self.url, self.encoding = url, encoding.strip().lower()
        self._raw_fallback = self.encoding == "deflate"  # some servers send deflate without its header
        if self.encoding in ("", "identity"):
            self._z = None
        elif self.encoding in ("gzip", "x-gzip"):
            self._z = zlib.decompressobj(zlib.MAX_WBITS | 16)
        elif self.encoding == "deflate":
            self._z = zlib.decompressobj()
        else:
            raise FetchError(f"{url} is sent with Content-Encoding {encoding!r}, which is not supported")

    def feed(self, data: bytes, room: int) -> bytes:
        if self._z is None:
            return data
        try:
            out = self._z.decompress(data, max(room, 0) + 1)
        except zlib.error as e:
            if self._raw_fallback:
                self._raw_fallback = False
                self._z = zlib.decompressobj(-zlib.MAX_WBITS)
                return self.feed(data, room)
            raise FetchError(f"{self.url}: the {self.encoding} body is corrupt ({e})") from e
        self._raw_fallback = False
        return out

    def flush(self) -> bytes:
        try:
            return self._z.flush() if self._z is not None else b""
        except zlib.error as e:
            raise FetchError(f"{self.url}: the {self.encoding} body is corrupt ({e})") from e
