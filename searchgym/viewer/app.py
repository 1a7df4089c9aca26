"""The viewer's web app (FastAPI): one page, its static files, and a JSON API over an
`EpisodeTable`.

- ``GET /`` — the page; ``GET /static/…`` — its scripts and style sheet.
- ``GET /api/overview`` — runs (with their env, their metrics.json, sweep.json or training
  curves), sources (agents, training steps), arms (what the summary rows compare) and the
  table's ``version``.
- ``GET /api/version`` — the table's version (and the ``problem`` of the last refresh, if any),
  after looking for new training steps and metrics lines (`LiveTable.refresh`): the page polls
  it and, when it has changed, loads the overview again and redraws.
- ``GET /api/episodes?…`` — a page of the episodes list (`Query`'s fields as parameters);
  ``GET /api/summary?…`` — a summary row per arm (with its EM interval) over every episode the
  same filters keep. The first page comes before the summary has read every file.
- ``GET /api/episode/{id}`` — one episode as saved; ``GET /api/compare?a=S&b=S`` — the tasks two
  sources share and who solved them; ``GET /api/steps/{run}`` — a training run's sampled
  episodes summed up per step.
- ``GET /api/skipped`` — how many episodes there are and what was skipped: files that cannot be
  read and malformed lines, counted per file with the first few reasons (every file is read
  first). A malformed line is in no list, summary or comparison; its episode number answers a
  sentence.

A bad parameter is answered with status 400 and a ``detail`` that says what is wrong.

Trajectory text never reaches the page as markup: the API sends JSON and the page's scripts put
text into the page with ``textContent`` only. The page is served with a content security policy
that allows no inline script, and only the hosts of a loopback address are answered.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from importlib.resources import files

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.trustedhost import TrustedHostMiddleware
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.staticfiles import StaticFiles

from searchgym.errors import SearchGymError
from searchgym.viewer.live import LiveTable
from searchgym.viewer.page import render_page
from searchgym.viewer.query import Query
from searchgym.viewer.runs import discover
from searchgym.viewer.table import EpisodeTable

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)


def create_app(
    paths: Sequence[str | os.PathLike] | EpisodeTable,
    *,
    allowed_hosts: Sequence[str] = (),
    refresh_interval: float = 1.0,
) -> FastAPI:
    """The viewer over the runs under ``paths`` (or an already built table), which looks for
    new training steps at most every ``refresh_interval`` seconds. Requests must name the host
    ``127.0.0.1``, ``localhost`` or one of ``allowed_hosts`` (guards a loopback server against
    DNS rebinding)."""
    table = paths if isinstance(paths, EpisodeTable) else EpisodeTable(discover(paths))
    table.load_in_background()
    live = LiveTable(table, min_interval=refresh_interval)
    app = FastAPI(title="searchgym viewer", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.live = live
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

    @app.exception_handler(RequestValidationError)
    async def bad_parameter(request: Request, exc: RequestValidationError) -> JSONResponse:
        said = []
        for error in exc.errors():
            name = error["loc"][-1] if error.get("loc") else "a parameter"
            if error.get("type") == "missing":
                said.append(f"{name} is missing")
            else:
                said.append(f"{name}={error.get('input')!r}: {error.get('msg', 'not valid').lower()}")
        return JSONResponse({"detail": "; ".join(said)}, status_code=400)

    @app.get("/", response_class=HTMLResponse)
    def index() -> str:
        return page

    @app.get("/api/overview")
    def overview() -> dict:
        version = live.version  # read first: a newer table then makes the page ask again
        return {**live.table.overview(), "version": version}

    @app.get("/api/version")
    def version() -> dict:
        return {"version": live.refresh(), "problem": live.problem}

    @app.get("/api/episodes")
    def episodes(request: Request) -> dict:
        return live.table.page(Query.from_params(dict(request.query_params)))

    @app.get("/api/summary")
    def summary(request: Request) -> dict:
        return live.table.summary(Query.from_params(dict(request.query_params)))

    @app.get("/api/episode/{episode}")
    def one_episode(episode: int) -> dict:
        return live.table.episode(episode)

    @app.get("/api/compare")
    def compare(a: int, b: int) -> dict:
        return live.table.compare(a, b)

    @app.get("/api/steps/{run}")
    def steps(run: int) -> list:
        return live.table.steps(run)

    @app.get("/api/skipped")
    def skipped() -> dict:
        table = live.table
        return {"episodes": table.valid(), "skipped": [s.to_dict() for s in table.skipped()]}

    return app
