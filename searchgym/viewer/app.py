"""The viewer's web app (FastAPI): one page, its static files, and a JSON API over an
`EpisodeTable`.

- ``GET /`` — the page; ``GET /static/…`` — its scripts and style sheet.
- ``GET /api/overview`` — runs (with their metrics.json, sweep.json or training curves), sources
  (agents, training steps) and arms (what the summary rows compare).
- ``GET /api/episodes?…`` — a page of the episodes list (`Query`'s fields as parameters);
  ``GET /api/summary?…`` — a summary row per arm (with its EM interval) over every episode the
  same filters keep. The first page comes before the summary has read every file.
- ``GET /api/episode/{id}`` — one episode as saved; ``GET /api/compare?a=S&b=S`` — the tasks two
  sources share and who solved them; ``GET /api/steps/{run}`` — a training run's sampled
  episodes summed up per step.

Trajectory text never reaches the page as markup: the API sends JSON and the page's scripts put
text into the page with ``textContent`` only. The page is served with a content security policy
that allows no inline script, and only the hosts of a loopback address are answered.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from importlib.resources import files

from fastapi import FastAPI, Request
from fastapi.middleware.trustedhost import TrustedHostMiddleware
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.staticfiles import StaticFiles

from searchgym.errors import SearchGymError
from searchgym.viewer.page import render_page
from searchgym.viewer.query import Query
from searchgym.viewer.runs import discover
from searchgym.viewer.table import EpisodeTable

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)


def create_app(
    paths: Sequence[str | os.PathLike] | EpisodeTable, *, allowed_hosts: Sequence[str] = ()
) -> FastAPI:
    """The viewer over the runs under ``paths`` (or an already built table). Requests must name
    the host ``127.0.0.1``, ``localhost`` or one of ``allowed_hosts`` (guards a loopback server
    against DNS rebinding)."""
    table = paths if isinstance(paths, EpisodeTable) else EpisodeTable(discover(paths))
    table.load_in_background()
    app = FastAPI(title="searchgym viewer", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.table = table
    hosts = ["127.0.0.1", "localhost", "[::1]", *allowed_hosts]
    app.add_middleware(TrustedHostMiddleware, allowed_hosts=hosts)
    app.mount("/static", StaticFiles(directory=str(files("searchgym.viewer") / "static")), name="static")
    page = render_page(inline=False)

    @app.middleware("http")
    async def security_headers(request: Request, call_next):
        response = await call_next(request)
        response.headers["Content-Security-Policy"] = CSP
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "no-referrer"
        return response

    @app.exception_handler(SearchGymError)
    async def bad_request(request: Request, exc: SearchGymError) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=400)

    @app.get("/", response_class=HTMLResponse)
    def index() -> str:
        return page

    @app.get("/api/overview")
    def overview() -> dict:
        return table.overview()

    @app.get("/api/episodes")
    def episodes(request: Request) -> dict:
        return table.page(Query.from_params(dict(request.query_params)))

    @app.get("/api/summary")
    def summary(request: Request) -> dict:
        return table.summary(Query.from_params(dict(request.query_params)))

    @app.get("/api/episode/{gid}")
    def episode(gid: int) -> dict:
        return table.episode(gid)

    @app.get("/api/compare")
    def compare(a: int, b: int) -> dict:
        return table.compare(a, b)

    @app.get("/api/steps/{run}")
    def steps(run: int) -> list:
        return table.steps(run)

    return app
