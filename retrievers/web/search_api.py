"""Live web search engines behind the `WebSearcher` protocol: SerpAPI (Google), Brave Search and
any SearXNG instance.

Each adapter is a thin request plus a pure parser (``parse_serpapi``, ``parse_brave``,
``parse_searxng``: response JSON -> `SearchResult` list) that is tested on recorded responses.
Failures raise `FetchError` with a message an agent or a user can act on: a rejected key names
the environment variable to check, a rate limit is a `RateLimited` with ``retry_after`` seconds
when the service says, a server error says to try later. The API key never appears in an error
message, and requests go straight to the transport rather than through ``httpx.Client``, whose
INFO log line would print SerpAPI's URL with the key in it. The engines' endpoints are the user's
configuration, not an agent's choice, so they do not pass the address guard (a SearXNG instance
on localhost is the common case).
"""

from __future__ import annotations

import email.utils
import html
import json
import os
import re
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import httpx

from searchgym.errors import ConfigError
from searchgym.retrievers.web.page import FetchError, SearchResult

_TAG = re.compile(r"<[^<>]*>")  # not [^>]*: a run of "<" would make it n²
MAX_RESPONSE_BYTES = 5_000_000
"""A search API answer larger than this is refused; real ones are tens of kilobytes."""
_S = TypeVar("_S", bound="_APISearch")


class RateLimited(FetchError):
    """The search API refused because of a rate limit or an exhausted quota (HTTP 429).
    ``retry_after`` is how many seconds the service asked to wait, or None if it did not say."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def _text(value: Any) -> str:
    """Plain text from an API string field that may carry ``<strong>`` marks and entities.

    >>> _text("The <strong>Eiffel</strong> Tower &amp; more")
    'The Eiffel Tower & more'
    """
    return " ".join(html.unescape(_TAG.sub("", value)).split()) if isinstance(value, str) else ""


def _rows(data: Any, *path: str) -> list:
    """``data[path[0]][path[1]]...`` as a list; a missing key is no results, a wrong type an error."""
    node = data
    for key in path:
        if not isinstance(node, Mapping):
            raise FetchError(f"the search API answered in an unexpected shape (no object at {key!r})")
        node = node.get(key)
        if node is None:
            return []
    if not isinstance(node, list):
        raise FetchError(f"the search API answered in an unexpected shape ({'.'.join(path)} is not a list)")
    return node


def parse_serpapi(data: Mapping[str, Any]) -> list[SearchResult]:
    """SerpAPI's ``organic_results`` (``title``, ``link``, ``snippet``), in rank order.
    An ``error`` saying the engine found nothing is an empty list; any other error raises.

    >>> parse_serpapi({"organic_results": [{"position": 1, "title": "Paris", "link": "https://x.org/p",
    ...                                     "snippet": "Capital of France."}]})
    [SearchResult(title='Paris', url='https://x.org/p', snippet='Capital of France.', score=None)]
    """
    error = data.get("error") if isinstance(data, Mapping) else None
    if error:
        empty = (data.get("search_information") or {}).get("organic_results_state") == "Fully empty"
        if empty or "returned any results" in str(error):
            return []
        raise FetchError(f"SerpAPI could not search: {_text(error)}")
    rows = sorted(_rows(data, "organic_results"), key=lambda r: _position(r))
    return [
        SearchResult(_text(r.get("title")), r["link"], _text(r.get("snippet")))
        for r in rows
        if isinstance(r, Mapping) and isinstance(r.get("link"), str)
    ]


def _position(row: Any) -> float:
    position = row.get("position") if isinstance(row, Mapping) else None
    return float(position) if isinstance(position, int | float) else float("inf")


def parse_brave(data: Mapping[str, Any]) -> list[SearchResult]:
    """Brave's ``web.results`` (``title``, ``url``, ``description``), in rank order, with its
    ``<strong>`` highlighting removed; a response without a ``web`` section has no results."""
    rows = _rows(data, "web", "results")
    return [
        SearchResult(_text(r.get("title")), r["url"], _text(r.get("description")))
        for r in rows
        if isinstance(r, Mapping) and isinstance(r.get("url"), str)
    ]


def parse_searxng(data: Mapping[str, Any]) -> list[SearchResult]:
    """SearXNG's ``results`` (``title``, ``url``, ``content``, ``score``), in its order."""
    rows = _rows(data, "results")
    return [
        SearchResult(
            _text(r.get("title")),
            r["url"],
            _text(r.get("content")),
            float(r["score"]) if isinstance(r.get("score"), int | float) else None,
        )
        for r in rows
        if isinstance(r, Mapping) and isinstance(r.get("url"), str)
    ]


def _retry_after(headers: httpx.Headers) -> float | None:
    """Seconds to wait from ``Retry-After`` (seconds or an HTTP date) or Brave's
    ``X-RateLimit-Reset`` (seconds per window, comma-separated: the first is the shortest)."""
    value = headers.get("retry-after", "").strip()
    if value.replace(".", "", 1).isdigit():
        return float(value)
    if value:
        try:
            return max(0.0, email.utils.parsedate_to_datetime(value).timestamp() - time.time())
        except (TypeError, ValueError):
            pass
    first = headers.get("x-ratelimit-reset", "").split(",")[0].strip()
    return float(first) if first.isdigit() else None


class _APISearch:
    """What the adapters share: one transport, a GET with a deadline, errors that read well."""

    name = ""
    env_var = ""
    reject_hint = ""  # what to check when the service refuses the credentials

    def __init__(self, endpoint: str, timeout: float, transport: httpx.BaseTransport | None) -> None:
        if not timeout > 0:
            raise ConfigError(f"timeout must be > 0 seconds, got {timeout}")
        self.endpoint, self.timeout = endpoint, timeout
        self._transport = transport or httpx.HTTPTransport(retries=1)
        self._secret = ""

    def _key(self, api_key: str | None) -> str:
        key = api_key if api_key is not None else os.environ.get(self.env_var, "")
        if not key.strip():
            raise ConfigError(f"{self.name} needs an API key: pass api_key= or set {self.env_var}")
        self._secret = key.strip()
        return self._secret

    def _get(self, params: Mapping[str, Any], headers: Mapping[str, str], detail: Callable) -> Any:
        request = httpx.Request(
            "GET",
            self.endpoint,
            params={k: str(v) for k, v in params.items()},
            headers={"Accept": "application/json", "User-Agent": "searchgym", **headers},
            extensions={"timeout": httpx.Timeout(self.timeout).as_dict()},
        )
        deadline = time.monotonic() + self.timeout
        try:
            response = self._transport.handle_request(request)
            try:
                body = self._read(response, deadline)
            finally:
                response.close()
        except httpx.TimeoutException:
            raise FetchError(f"{self.name} timed out after {self.timeout:g}s") from None
        except httpx.HTTPError as e:  # `from None`: a chained exception could show the URL
            raise FetchError(self._scrub(f"could not reach {self.name}: {type(e).__name__}: {e}")) from None
        try:
            data = json.loads(body)
        except ValueError:
            data = None
        if response.status_code >= 400:
            raise self._error(response, detail(data) if isinstance(data, Mapping) else "")
        if not isinstance(data, Mapping):
            raise FetchError(f"{self.name} answered HTTP {response.status_code} without a JSON object")
        return data

    def _read(self, response: httpx.Response, deadline: float) -> bytes:
        """The decoded body, refused past `MAX_RESPONSE_BYTES` or once ``timeout`` has passed in
        all: httpx's timeout bounds each read, so a server that trickles bytes could stall forever."""
        body = bytearray()
        for chunk in response.iter_bytes():
            body += chunk
            if len(body) > MAX_RESPONSE_BYTES:
                raise FetchError(f"{self.name} answered more than {MAX_RESPONSE_BYTES} bytes; not read")
            if time.monotonic() > deadline:
                raise httpx.ReadTimeout("the whole answer took longer than the timeout")
        return bytes(body)

    def _error(self, response: httpx.Response, detail: str) -> FetchError:
        status = response.status_code
        said = self._scrub(f": {detail[:300]}" if detail else "")
        if status in (401, 403) or "SUBSCRIPTION_TOKEN" in detail:
            hint = self.reject_hint or f"check the API key in {self.env_var}"
            return FetchError(f"{self.name} rejected the request (HTTP {status}); {hint}{said}")
        if status == 429:
            wait = _retry_after(response.headers)
            after = f"retry after {wait:g}s" if wait is not None else "retry later"
            return RateLimited(f"{self.name} rate limit or quota reached (HTTP 429); {after}{said}", wait)
        if status >= 500:
            return FetchError(f"{self.name} server error (HTTP {status}); try again later{said}")
        return FetchError(f"{self.name} refused the request (HTTP {status}){said}")

    def _scrub(self, text: str) -> str:
        return text.replace(self._secret, "***") if self._secret else text

    def close(self) -> None:
        self._transport.close()

    def __enter__(self: _S) -> _S:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _check_k(k: int) -> None:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")


class SerpAPISearch(_APISearch):
    """Google (or another ``engine``) through SerpAPI; the key comes from ``api_key`` or
    ``SERPAPI_API_KEY``. ``params`` adds query parameters (``{"hl": "en", "gl": "us"}``)."""

    name, env_var = "SerpAPI", "SERPAPI_API_KEY"

    def __init__(
        self,
        api_key: str | None = None,
        *,
        engine: str = "google",
        params: Mapping[str, Any] | None = None,
        endpoint: str = "https://serpapi.com/search",
        timeout: float = 10.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        super().__init__(endpoint, timeout, transport)
        self.api_key = self._key(api_key)
        self.engine, self.params = engine, dict(params or {})

    def search(self, query: str, k: int = 5) -> list[SearchResult]:
        _check_k(k)
        params = {"engine": self.engine, "q": query, "num": k, **self.params, "api_key": self.api_key}
        return parse_serpapi(self._get(params, {}, lambda d: _text(d.get("error"))))[:k]


class BraveSearch(_APISearch):
    """Brave Search's web endpoint; the key comes from ``api_key`` or ``BRAVE_SEARCH_API_KEY``
    and travels in the ``X-Subscription-Token`` header. Brave returns at most 20 results."""

    name, env_var = "Brave Search", "BRAVE_SEARCH_API_KEY"

    def __init__(
        self,
        api_key: str | None = None,
        *,
        params: Mapping[str, Any] | None = None,
        endpoint: str = "https://api.search.brave.com/res/v1/web/search",
        timeout: float = 10.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        super().__init__(endpoint, timeout, transport)
        self.api_key = self._key(api_key)
        self.params = dict(params or {})

    def search(self, query: str, k: int = 5) -> list[SearchResult]:
        _check_k(k)
        params = {"q": query, "count": min(k, 20), **self.params}
        data = self._get(params, {"X-Subscription-Token": self.api_key}, _brave_detail)
        return parse_brave(data)[:k]


def _brave_detail(data: Mapping[str, Any]) -> str:
    """``{"error": {...}}`` or ``{"errors": [{...}]}`` -> ``"CODE: detail"``."""
    error = data.get("error") or next(iter(data.get("errors") or []), None)
    if not isinstance(error, Mapping):
        return _text(error)
    return ": ".join(_text(error.get(f)) for f in ("code", "detail") if error.get(f))


class SearxNG(_APISearch):
    """A SearXNG instance at ``base_url`` (its JSON format must be enabled: ``search.formats``
    in settings.yml lists ``json``). No key."""

    name = "SearXNG"
    reject_hint = "check that the instance enables the json format (search.formats in settings.yml)"

    def __init__(
        self,
        base_url: str,
        *,
        params: Mapping[str, Any] | None = None,
        timeout: float = 10.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        super().__init__(base_url.rstrip("/") + "/search", timeout, transport)
        self.params = dict(params or {})

    def search(self, query: str, k: int = 5) -> list[SearchResult]:
        _check_k(k)
        params = {"q": query, "format": "json", **self.params}
        return parse_searxng(self._get(params, {}, lambda d: _text(d.get("error"))))[:k]
