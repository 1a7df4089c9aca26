"""`Remote`: a client of a retrieval server speaking Search-R1's ``POST /retrieve``.

It works against ``searchgym serve`` and against Search-R1's own ``retrieval_server.py``. One
HTTP connection pool is reused across calls. Timeouts, refused connections and 5xx answers are
retried with exponential backoff; what still fails raises `RetrieverError`, which environments
show to the agent as an observation.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace

import httpx

from searchgym.errors import RetrieverError
from searchgym.retrievers.base import Doc, check_batch
from searchgym.retrievers.corpus import doc_from_row


class Remote:
    """Search through a retrieval server at ``url`` (e.g. ``http://127.0.0.1:8000``).

    ``timeout`` bounds each attempt in seconds; ``retries`` further attempts follow a failed one
    after ``backoff * 2**i`` seconds.
    """

    def __init__(self, url: str, *, timeout: float = 10.0, retries: int = 2, backoff: float = 0.2) -> None:
        if retries < 0 or timeout <= 0 or backoff < 0:
            raise ValueError(
                f"need timeout > 0, retries >= 0, backoff >= 0; got {timeout}, {retries}, {backoff}"
            )
        self.url = url.rstrip("/")
        self.retries, self.backoff = retries, backoff
        self._client = httpx.Client(base_url=self.url, timeout=timeout)

    def search(self, query: str, k: int = 3) -> list[Doc]:
        return self.batch_search([query], k)[0]

    def batch_search(self, queries: Sequence[str], k: int = 3) -> list[list[Doc]]:
        check_batch(queries, k)
        if not queries:
            return []
        payload = {"queries": list(queries), "topk": k, "return_scores": True}
        body = self._request("POST", "/retrieve", json=payload).json()
        try:
            results = body["result"]
            docs = [[self._doc(hit) for hit in hits] for hits in results]
        except (KeyError, TypeError, ValueError) as e:
            raise RetrieverError(f"{self.url}/retrieve answered in an unexpected shape: {e!r}") from e
        if len(docs) != len(queries):
            raise RetrieverError(
                f"{self.url}/retrieve answered {len(docs)} results for {len(queries)} queries"
            )
        return docs

    def doc(self, doc_id: str) -> Doc | None:
        try:
            row = self._request("GET", f"/doc/{doc_id}").json()
        except _Refused as e:
            if e.status == 404:  # unknown id, or a Search-R1 server, which has no /doc
                return None
            raise
        return Doc(row["id"], row["title"], row["text"])

    def health(self) -> dict:
        return self._request("GET", "/health").json()

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> Remote:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _request(self, method: str, path: str, **kwargs) -> httpx.Response:
        last: str = ""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff * 2 ** (attempt - 1))
            try:
                response = self._client.request(method, path, **kwargs)
            except httpx.TimeoutException:
                last = f"timed out after {self._client.timeout.read}s"
                continue
            except httpx.TransportError as e:
                last = f"could not connect ({type(e).__name__}: {e})"
                continue
            if response.status_code >= 500:
                last = f"server error {response.status_code}: {response.text[:200]}"
                continue
            if response.status_code >= 400:  # our request is wrong: retrying will not help
                raise _Refused(
                    f"{self.url}{path} refused the request ({response.status_code}): {response.text[:300]}",
                    response.status_code,
                )
            return response
        raise RetrieverError(f"{self.url}{path} failed after {self.retries + 1} attempt(s): {last}")

    @staticmethod
    def _doc(hit: dict) -> Doc:
        if "document" in hit:  # the return_scores form
            return replace(doc_from_row(hit["document"]), score=float(hit["score"]))
        return doc_from_row(hit)


class _Refused(RetrieverError):
    """The server answered 4xx: the request itself is wrong."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status
