"""The retrieval server: any retriever over HTTP (FastAPI).

Endpoints:

- ``POST /retrieve`` — exactly Search-R1's: ``{"queries": [...], "topk": 3, "return_scores": true}``
  → ``{"result": [[{"document": {"id", "contents"}, "score": s}, ...], ...]}`` (without scores,
  each result is the bare ``{"id", "contents"}`` document), so Search-R1-style rollouts can use it.
- ``POST /search`` — ours: ``{"queries": [...], "k": 3}`` → ``{"results": [[{"id", "title", "text",
  "score"}, ...], ...]}``.
- ``GET /doc/{id}`` — one stored document, 404 if unknown. ``GET /health`` — liveness and size.

Concurrent requests are batched: queries that arrive within ``batch_wait_ms`` of each other go to
the retriever as one ``batch_search`` call of at most ``max_batch`` queries and ``max_batch_chars``
characters, run in a worker thread so the event loop keeps accepting requests. Waiting requests
take turns, one query each, and a request not finished goes to the back of the line, so a small
request waits for at most about two batches however large the others are (a query's cost grows
with its length, hence the bound in characters). A request whose client hangs up leaves the line.
Parsing a request and encoding its response run in worker threads too.

`Limits` bound one request: its body, its queries, each query's length, its k and queries x k
(the results it asks for). A request over a limit is answered 413 (too large) or 422 (k out of
range), with a message naming the limit and the `searchgym serve` flag that sets it.

Only JSON bodies are read (415 otherwise), and only requests whose Host header names a loopback
address or one of ``allowed_hosts`` are answered (400 otherwise): a web page cannot reach a
loopback server through DNS rebinding, nor post to it as a form. A connection that does not send
its request headers within ``read_timeout`` seconds is closed (uvicorn times out only idle
keep-alive connections), and a body that does not arrive within it is answered 408. A client that
hangs up mid-request is logged in one line.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections import deque
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

from fastapi import FastAPI, HTTPException, Request, Response
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, Field, ValidationError
from starlette.requests import ClientDisconnect

from searchgym.errors import ConfigError
from searchgym.retrievers.base import Doc, Retriever
from searchgym.serving import LOOPBACK_HOSTS, HostCheck, ServerThread, uvicorn_config

__all__ = ["Limits", "ServerThread", "create_app", "uvicorn_config"]

MAX_K = 1000

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Limits:
    """What one request may ask for; each is a flag of ``searchgym serve``."""

    max_queries: int = 10_000
    """Queries in one request (``--max-queries``)."""
    max_topk: int = MAX_K
    """k of one request (``--max-topk``)."""
    max_results: int = 100_000
    """Queries x k of one request: the documents it may get back (``--max-results``)."""
    max_query_chars: int = 2_000
    """Characters of one query (``--max-query-chars``): a query's cost grows with its length."""
    max_body_bytes: int = 16 << 20
    """Size of a request's body (``--max-body-mb``)."""

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")


class RetrieveRequest(BaseModel):
    queries: list[str]
    topk: int | None = Field(default=None, ge=1)
    return_scores: bool = False


class SearchRequest(BaseModel):
    queries: list[str]
    k: int = Field(default=3, ge=1)


@dataclass
class _Pending:
    queries: list[str]
    k: int
    future: asyncio.Future = field(repr=False)
    sent: int = 0
    """Queries handed to `batch_search` so far."""
    done: int = 0
    results: list[list[Doc]] = field(default_factory=list, repr=False)


class SearchBatcher:
    """Collects concurrent requests into ``batch_search`` calls, one at a time, of at most
    ``max_batch`` queries and ``max_batch_chars`` characters; waiting requests take turns, one
    query each, so none waits for another to finish."""

    def __init__(
        self,
        retriever: Retriever,
        max_batch: int = 64,
        batch_wait_ms: float = 2.0,
        max_batch_chars: int = 8_192,
    ) -> None:
        self.retriever, self.max_batch, self.wait = retriever, max_batch, batch_wait_ms / 1000
        self.max_batch_chars = max_batch_chars
        self.waiting: deque[_Pending] = deque()
        self._arrived = asyncio.Event()
        self.batches = 0

    async def search(self, queries: list[str], k: int) -> list[list[Doc]]:
        """The results of ``queries``; cancelling the call takes them out of the line."""
        if not queries:
            return []
        pending = _Pending(queries, k, asyncio.get_running_loop().create_future())
        self.waiting.append(pending)
        self._arrived.set()
        try:
            return await pending.future
        finally:
            with contextlib.suppress(ValueError):
                self.waiting.remove(pending)

    async def run(self) -> None:
        while True:
            await self._arrived.wait()
            if self._queued() < self.max_batch:
                await asyncio.sleep(self.wait)  # let concurrent requests join the batch
            await self._answer(self._take())
            if not self.waiting:
                self._arrived.clear()

    def _queued(self) -> int:
        return sum(len(p.queries) - p.sent for p in self.waiting)

    def _take(self) -> list[tuple[_Pending, list[str]]]:
        """The next batch: one query from each waiting request in turn (a request with more to
        send goes to the back of the line) until ``max_batch`` queries or ``max_batch_chars``
        characters; always at least one query, however long."""
        taken: dict[int, tuple[_Pending, list[str]]] = {}
        count = chars = 0
        while self.waiting and count < self.max_batch:
            pending = self.waiting.popleft()
            query = pending.queries[pending.sent]
            if count and chars + len(query) > self.max_batch_chars:
                self.waiting.appendleft(pending)
                break
            taken.setdefault(id(pending), (pending, []))[1].append(query)
            pending.sent += 1
            count, chars = count + 1, chars + len(query)
            if pending.sent < len(pending.queries):
                self.waiting.append(pending)
        return list(taken.values())

    async def _answer(self, batch: list[tuple[_Pending, list[str]]]) -> None:
        for k in sorted({p.k for p, _ in batch}):
            group = [(p, q) for p, q in batch if p.k == k]
            queries = [query for _, q in group for query in q]
            try:
                results = await asyncio.to_thread(self.retriever.batch_search, queries, k)
            except Exception as e:  # the requests get the error; the server keeps serving
                for p, _ in group:
                    with contextlib.suppress(ValueError):
                        self.waiting.remove(p)
                    if not p.future.done():
                        p.future.set_exception(e)
                continue
            self.batches += 1
            start = 0
            for p, q in group:
                p.results.extend(results[start : start + len(q)])
                p.done += len(q)
                start += len(q)
                if p.done == len(p.queries) and not p.future.done():
                    p.future.set_result(p.results)


def create_app(
    retriever: Retriever,
    *,
    default_topk: int = 3,
    max_batch: int = 64,
    max_batch_chars: int = 8_192,
    batch_wait_ms: float = 2.0,
    limits: Limits | None = None,
    allowed_hosts: Sequence[str] = (),
    read_timeout: float = 10.0,
) -> FastAPI:
    """A FastAPI app serving ``retriever``; run it with `ServerThread` or `uvicorn_config` (which
    apply ``read_timeout`` to request headers too). Requests must name a loopback host or one of
    ``allowed_hosts`` (``"*"``: any host)."""
    limits = limits or Limits()
    if not 1 <= default_topk <= limits.max_topk:
        raise ConfigError(f"--topk must be between 1 and --max-topk ({limits.max_topk}), got {default_topk}")
    batcher = SearchBatcher(retriever, max_batch, batch_wait_ms, max_batch_chars)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        task = asyncio.create_task(batcher.run())
        yield
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    app = FastAPI(title="searchgym retrieval server", lifespan=lifespan)
    app.state.batcher = batcher
    app.state.read_timeout = read_timeout
    app.add_middleware(HostCheck, hosts=[*LOOPBACK_HOSTS, *allowed_hosts])

    @app.post("/retrieve")
    async def retrieve(request: Request) -> Response:
        body = await _parse(request, RetrieveRequest, limits, read_timeout)
        k = _check(body.queries, body.topk or default_topk, "topk", limits)
        results = await _search(request, batcher, body.queries, k)
        return await _encode(_retrieve_response, results, body.return_scores)

    @app.post("/search")
    async def search(request: Request) -> Response:
        body = await _parse(request, SearchRequest, limits, read_timeout)
        k = _check(body.queries, body.k, "k", limits)
        results = await _search(request, batcher, body.queries, k)
        return await _encode(_search_response, results)

    @app.get("/doc/{doc_id}")
    async def doc(doc_id: str) -> dict:
        found = retriever.doc(doc_id)
        if found is None:
            raise HTTPException(status_code=404, detail=f"no document with id {doc_id!r}")
        return asdict(found)

    @app.get("/health")
    async def health() -> dict:
        size = len(retriever) if hasattr(retriever, "__len__") else None
        return {"status": "ok", "retriever": type(retriever).__name__, "n_docs": size}

    return app


async def _parse(request: Request, model: type[BaseModel], limits: Limits, read_timeout: float) -> BaseModel:
    """The request's JSON body as ``model``, read up to ``max_body_bytes`` within ``read_timeout``
    seconds and parsed in a worker thread; 415 if it is not JSON, 413 past the limit, 408 if it
    is late, 422 if it is not a valid ``model``."""
    media_type = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if media_type != "application/json":
        raise HTTPException(
            status_code=415,
            detail=f"send the body as JSON with Content-Type: application/json, not {media_type or 'none'!r}",
        )
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limits.max_body_bytes:
        raise _too_large(limits)
    try:
        body = await asyncio.wait_for(_read(request, limits), read_timeout)
    except asyncio.TimeoutError:
        raise HTTPException(
            status_code=408,
            detail=f"the request body did not arrive within {read_timeout:g} s (--read-timeout)",
            headers={"Connection": "close"},
        ) from None
    except ClientDisconnect:
        log.warning("%s hung up while sending the body of %s", _client(request), request.url.path)
        raise HTTPException(status_code=400, detail="the client hung up") from None
    try:
        return await asyncio.to_thread(model.model_validate_json, body)
    except ValidationError as e:
        # without the input, which may be NaN, which JSON cannot carry (that was a 500)
        raise RequestValidationError(
            e.errors(include_url=False, include_context=False, include_input=False)
        ) from None


async def _read(request: Request, limits: Limits) -> bytes:
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limits.max_body_bytes:
            raise _too_large(limits)
        chunks.append(chunk)
    return b"".join(chunks)


def _too_large(limits: Limits) -> HTTPException:
    return HTTPException(
        status_code=413,
        detail=f"the request body is larger than {limits.max_body_bytes:,} bytes "
        "(searchgym serve --max-body-mb); send fewer or shorter queries per request",
    )


def _client(request: Request) -> str:
    return f"{request.client.host}:{request.client.port}" if request.client else "a client"


async def _search(request: Request, batcher: SearchBatcher, queries: list[str], k: int) -> list[list[Doc]]:
    """The batcher's results for ``queries``; if the client hangs up first, its queries leave
    the line (a client that timed out and retries would otherwise be searched twice)."""
    search = asyncio.ensure_future(batcher.search(queries, k))
    gone = asyncio.ensure_future(_hung_up(request))
    try:
        await asyncio.wait({search, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
    if not search.done():
        search.cancel()
        log.warning("%s hung up before its %d queries were answered", _client(request), len(queries))
        raise HTTPException(status_code=400, detail="the client hung up")
    return search.result()


async def _hung_up(request: Request) -> None:
    """Returns once the client closes the connection (its body has been read already)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


def _check(queries: list[str], k: int, name: str, limits: Limits) -> int:
    """``k``, if the request is within ``limits``; else the HTTP error that says which."""
    if k > limits.max_topk:
        raise HTTPException(
            status_code=422,
            detail=f"{name} is {k}; this server answers at most {limits.max_topk} (--max-topk)",
        )
    longest = max(queries, key=len, default="")
    if len(longest) > limits.max_query_chars:
        raise HTTPException(
            status_code=413,
            detail=f"query {queries.index(longest)} is {len(longest):,} characters long; this server "
            f"takes at most {limits.max_query_chars:,} (--max-query-chars): shorten it",
        )
    if len(queries) > limits.max_queries:
        raise HTTPException(
            status_code=413,
            detail=f"{len(queries):,} queries in one request; this server takes at most "
            f"{limits.max_queries:,} (--max-queries): split them into several requests",
        )
    if len(queries) * k > limits.max_results:
        raise HTTPException(
            status_code=413,
            detail=f"{len(queries):,} queries x {name} {k} = {len(queries) * k:,} results; this server "
            f"returns at most {limits.max_results:,} per request (--max-results): send fewer queries "
            f"per request or a smaller {name}",
        )
    return k


async def _encode(shape, *args) -> Response:
    """The JSON response, encoded in a worker thread so the event loop keeps serving."""
    content = await asyncio.to_thread(lambda: json.dumps(shape(*args), ensure_ascii=False).encode("utf-8"))
    return Response(content, media_type="application/json")


def _retrieve_response(results: list[list[Doc]], return_scores: bool) -> dict:
    if return_scores:
        return {"result": [[{"document": _search_r1(d), "score": d.score} for d in r] for r in results]}
    return {"result": [[_search_r1(d) for d in r] for r in results]}


def _search_response(results: list[list[Doc]]) -> dict:
    return {"results": [[asdict(d) for d in r] for r in results]}


def _search_r1(doc: Doc) -> dict[str, str]:
    return {"id": doc.id, "contents": doc.contents()}
