"""The retrieval server: any retriever over HTTP (FastAPI).

Endpoints:

- ``POST /retrieve`` — exactly Search-R1's: ``{"queries": [...], "topk": 3, "return_scores": true}``
  → ``{"result": [[{"document": {"id", "contents"}, "score": s}, ...], ...]}`` (without scores,
  each result is the bare ``{"id", "contents"}`` document), so Search-R1-style rollouts can use it.
- ``POST /search`` — ours: ``{"queries": [...], "k": 3}`` → ``{"results": [[{"id", "title", "text",
  "score"}, ...], ...]}``.
- ``GET /doc/{id}`` — one stored document, 404 if unknown. ``GET /health`` — liveness and size.

Concurrent requests are batched: queries that arrive within ``batch_wait_ms`` of each other (up
to ``max_batch`` of them) go to the retriever as one ``batch_search`` call, run in a worker thread
so the event loop keeps accepting requests. A request of many queries is searched a slice at a
time, the slices of all waiting requests taken in turn, so a small request is answered promptly
while a large one runs. Parsing a request and encoding its response run in worker threads too.

`Limits` bound one request: its body, its queries, its k and queries x k (the results it asks
for). A request over a limit is answered 413 (too large) or 422 (k out of range), with a message
naming the limit and the `searchgym serve` flag that sets it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections import deque
from dataclasses import asdict, dataclass, field

from fastapi import FastAPI, HTTPException, Request, Response
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, Field, ValidationError

from searchgym.errors import ConfigError
from searchgym.retrievers.base import Doc, Retriever

MAX_K = 1000


@dataclass(frozen=True)
class Limits:
    """What one request may ask for; each is a flag of ``searchgym serve``."""

    max_queries: int = 10_000
    """Queries in one request (``--max-queries``)."""
    max_topk: int = MAX_K
    """k of one request (``--max-topk``)."""
    max_results: int = 100_000
    """Queries x k of one request: the documents it may get back (``--max-results``)."""
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


class Batcher:
    """Collects concurrent requests into ``batch_search`` calls, one at a time; each call takes
    a share of every waiting request's queries, so none waits for another to finish."""

    def __init__(self, retriever: Retriever, max_batch: int = 64, batch_wait_ms: float = 2.0) -> None:
        self.retriever, self.max_batch, self.wait = retriever, max_batch, batch_wait_ms / 1000
        self.waiting: deque[_Pending] = deque()
        self._arrived = asyncio.Event()
        self.batches = 0

    async def search(self, queries: list[str], k: int) -> list[list[Doc]]:
        if not queries:
            return []
        pending = _Pending(queries, k, asyncio.get_running_loop().create_future())
        self.waiting.append(pending)
        self._arrived.set()
        return await pending.future

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
        """Up to ``max_batch`` queries, an equal share from each waiting request in turn."""
        taken: list[tuple[_Pending, list[str]]] = []
        room = self.max_batch
        while room and self.waiting:
            share = max(1, room // len(self.waiting))
            for pending in list(self.waiting):
                n = min(share, room, len(pending.queries) - pending.sent)
                taken.append((pending, pending.queries[pending.sent : pending.sent + n]))
                pending.sent += n
                room -= n
                if pending.sent == len(pending.queries):
                    self.waiting.remove(pending)
                if not room:
                    break
        return taken

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
    batch_wait_ms: float = 2.0,
    limits: Limits | None = None,
) -> FastAPI:
    """A FastAPI app serving ``retriever``; run it with uvicorn (``searchgym serve`` does)."""
    limits = limits or Limits()
    if not 1 <= default_topk <= limits.max_topk:
        raise ConfigError(f"--topk must be between 1 and --max-topk ({limits.max_topk}), got {default_topk}")
    batcher = Batcher(retriever, max_batch=max_batch, batch_wait_ms=batch_wait_ms)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        task = asyncio.create_task(batcher.run())
        yield
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    app = FastAPI(title="searchgym retrieval server", lifespan=lifespan)
    app.state.batcher = batcher

    @app.post("/retrieve")
    async def retrieve(request: Request) -> Response:
        body = await _parse(request, RetrieveRequest, limits)
        k = _check(body.queries, body.topk or default_topk, "topk", limits)
        results = await batcher.search(body.queries, k)
        return await _encode(_retrieve_response, results, body.return_scores)

    @app.post("/search")
    async def search(request: Request) -> Response:
        body = await _parse(request, SearchRequest, limits)
        results = await batcher.search(body.queries, _check(body.queries, body.k, "k", limits))
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


async def _parse(request: Request, model: type[BaseModel], limits: Limits) -> BaseModel:
    """The request's JSON body as ``model``, read up to ``max_body_bytes`` and parsed in a
    worker thread; 413 past the limit, 422 if it is not a valid ``model``."""
    too_large = HTTPException(
        status_code=413,
        detail=f"the request body is larger than {limits.max_body_bytes:,} bytes "
        "(searchgym serve --max-body-mb); send fewer or shorter queries per request",
    )
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limits.max_body_bytes:
        raise too_large
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limits.max_body_bytes:
            raise too_large
        chunks.append(chunk)
    try:
        return await asyncio.to_thread(model.model_validate_json, b"".join(chunks))
    except ValidationError as e:
        # without the input, which may be NaN, which JSON cannot carry (that was a 500)
        raise RequestValidationError(
            e.errors(include_url=False, include_context=False, include_input=False)
        ) from None


def _check(queries: list[str], k: int, name: str, limits: Limits) -> int:
    """``k``, if the request is within ``limits``; else the HTTP error that says which."""
    if k > limits.max_topk:
        raise HTTPException(
            status_code=422,
            detail=f"{name} is {k}; this server answers at most {limits.max_topk} (--max-topk)",
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


class ServerThread:
    """Run an app with uvicorn in a background thread (tests, notebooks, envs that start their
    own server). ``url`` is known once the context is entered; the port is free-picked when 0.

    >>> from searchgym.retrievers import BM25
    >>> app = create_app(BM25.build([Doc("a", "Paris", "capital of France")]))
    >>> with ServerThread(app) as server:
    ...     server.url.startswith("http://127.0.0.1:")
    True
    """

    def __init__(self, app: FastAPI, host: str = "127.0.0.1", port: int = 0) -> None:
        import uvicorn

        self._server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning"))
        self._server.install_signal_handlers = lambda: None  # type: ignore[method-assign]
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self.url = ""

    def __enter__(self) -> ServerThread:
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the retrieval server did not start")
            time.sleep(0.01)
        host, port = self._server.servers[0].sockets[0].getsockname()[:2]
        self.url = f"http://{host}:{port}"
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
