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
so the event loop keeps accepting requests.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from dataclasses import asdict, dataclass, field

from fastapi import FastAPI, HTTPException
from pydantic import BaseModel, Field

from searchgym.retrievers.base import Doc, Retriever

MAX_K = 1000


class RetrieveRequest(BaseModel):
    queries: list[str]
    topk: int | None = Field(default=None, ge=1, le=MAX_K)
    return_scores: bool = False


class SearchRequest(BaseModel):
    queries: list[str]
    k: int = Field(default=3, ge=1, le=MAX_K)


@dataclass
class _Pending:
    queries: list[str]
    k: int
    future: asyncio.Future = field(repr=False)


class Batcher:
    """Collects concurrent requests into ``batch_search`` calls, one at a time."""

    def __init__(self, retriever: Retriever, max_batch: int = 64, batch_wait_ms: float = 2.0) -> None:
        self.retriever, self.max_batch, self.wait = retriever, max_batch, batch_wait_ms / 1000
        self.queue: asyncio.Queue[_Pending] = asyncio.Queue()
        self.batches = 0

    async def search(self, queries: list[str], k: int) -> list[list[Doc]]:
        if not queries:
            return []
        pending = _Pending(queries, k, asyncio.get_running_loop().create_future())
        await self.queue.put(pending)
        return await pending.future

    async def run(self) -> None:
        while True:
            batch = [await self.queue.get()]
            deadline = asyncio.get_running_loop().time() + self.wait
            while sum(len(p.queries) for p in batch) < self.max_batch:
                timeout = deadline - asyncio.get_running_loop().time()
                try:
                    batch.append(await asyncio.wait_for(self.queue.get(), max(timeout, 0)))
                except asyncio.TimeoutError:
                    break
            await self._answer(batch)

    async def _answer(self, batch: list[_Pending]) -> None:
        for k in sorted({p.k for p in batch}):
            group = [p for p in batch if p.k == k]
            queries = [q for p in group for q in p.queries]
            try:
                results = await asyncio.to_thread(self.retriever.batch_search, queries, k)
            except Exception as e:  # the requests get the error; the server keeps serving
                for p in group:
                    if not p.future.done():
                        p.future.set_exception(e)
                continue
            self.batches += 1
            start = 0
            for p in group:
                if not p.future.done():
                    p.future.set_result(results[start : start + len(p.queries)])
                start += len(p.queries)


def create_app(
    retriever: Retriever, *, default_topk: int = 3, max_batch: int = 64, batch_wait_ms: float = 2.0
) -> FastAPI:
    """A FastAPI app serving ``retriever``; run it with uvicorn (``searchgym serve`` does)."""
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
    async def retrieve(request: RetrieveRequest) -> dict:
        results = await batcher.search(request.queries, request.topk or default_topk)
        if request.return_scores:
            return {"result": [[{"document": _search_r1(d), "score": d.score} for d in r] for r in results]}
        return {"result": [[_search_r1(d) for d in r] for r in results]}

    @app.post("/search")
    async def search(request: SearchRequest) -> dict:
        results = await batcher.search(request.queries, request.k)
        return {"results": [[asdict(d) for d in r] for r in results]}

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
