"""Entry points of the web environments: an offline site written once, searched and browsed.

The site of the generated world (or of the mini-Wikipedia corpus) is written once into a cache
folder, ``$XDG_CACHE_HOME/searchgym/sites/<name>-<digest>`` (``~/.cache`` when unset), named
after a digest of what it is made from, so a later process reuses it; ``site_dir`` puts it
elsewhere. Pages reach the env either straight from the files (``serve="files"``, at the base
URL `DEFAULT_BASE_URL`) or over HTTP from a server the env starts on loopback (``serve="http"``:
`SiteServer` and an `HttpSource` that may reach exactly that server; `WebEnv.close` stops it).
(The mini-wiki site is at `MINIWIKI_BASE_URL`.)
The site's search index is built once per process and folder.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urljoin

import gymnasium as gym

from searchgym.envs.factories import env_tasks, reward_weights
from searchgym.envs.rewards import RewardWeights
from searchgym.envs.web_env import WebEnv
from searchgym.envs.wrappers import TurnLimit
from searchgym.errors import ConfigError
from searchgym.retrievers.web import PageSource, RawPage
from searchgym.retrievers.web.fetch import HttpSource
from searchgym.retrievers.web.serve import SiteServer
from searchgym.retrievers.web.site import DEFAULT_BASE_URL, FileSource, SiteSearch
from searchgym.tasks.html_site import read_manifest
from searchgym.tasks.miniwiki import load_miniwiki, miniwiki_path
from searchgym.tasks.miniwiki_site import miniwiki_site_source, write_miniwiki_site
from searchgym.tasks.task import Task
from searchgym.tasks.world import load_world
from searchgym.tasks.world.site import site_source, write_site

Serve = Literal["files", "http"]
SERVE = ("files", "http")
DEFAULT_MAX_TURNS = 12
MEMO_SIZE = 4
_SET_BY_FACTORY = frozenset({"tasks", "searcher", "source", "rewards", "evidence_urls"})
_FACTORY_OPTIONS = frozenset({"max_turns", "rewards", "serve", "site_dir", "show_progress"})
MINIWIKI_BASE_URL = "https://mini-wikipedia.example/"


def default_sites_dir() -> Path:
    """``$XDG_CACHE_HOME/searchgym/sites`` (``~/.cache/searchgym/sites`` when unset)."""
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache).expanduser() / "searchgym" / "sites"


def fictional_web(
    *,
    seed: int = 0,
    n_passages: int = 2000,
    split: str = "dev",
    hops: int | list[int] | None = None,
    serve: Serve = "files",
    site_dir: str | os.PathLike | None = None,
    max_turns: int = DEFAULT_MAX_TURNS,
    rewards: RewardWeights | dict[str, Any] | None = None,
    show_progress: bool | None = None,
    task_set: str | None = None,
    **options: Any,
) -> gym.Env:
    """Questions about the generated world (or ``task_set``'s, `searchgym.envs.factories.env_tasks`),
    answered by browsing its site ("Fictopedia", see `searchgym.tasks.world.site`); ``options``
    are `WebEnv`'s (``protocol``, ``top_k``, ``page_tokens``: a page part's tokens as
    `searchgym.envs.observations.count_tokens` counts them, so at most 6 characters each)."""
    _check(serve, options)
    world = load_world(seed=seed, n_passages=n_passages)
    tasks = env_tasks(task_set, split, lambda: world.tasks(split, hops=hops), hops)
    root = (
        Path(site_dir)
        if site_dir is not None
        else _cache_folder(f"fictional-s{seed}-n{n_passages}", site_source(world))
    )
    write_site(world, root)
    return web_env(
        tasks, root, serve=serve, max_turns=max_turns, rewards=rewards, show_progress=show_progress, **options
    )


def mini_wiki_web(
    *,
    split: str = "dev",
    data_dir: str | os.PathLike | None = None,
    serve: Serve = "files",
    site_dir: str | os.PathLike | None = None,
    max_turns: int = DEFAULT_MAX_TURNS,
    rewards: RewardWeights | dict[str, Any] | None = None,
    show_progress: bool | None = None,
    task_set: str | None = None,
    **options: Any,
) -> gym.Env:
    """The mini-Wikipedia questions (`load_miniwiki`, or ``task_set``'s), answered by browsing the
    corpus as linked pages (`searchgym.tasks.miniwiki_site`); the corpus is read from
    ``data_dir`` as in `searchgym.envs.factories.mini_wiki`."""
    _check(serve, options)
    tasks = env_tasks(task_set, split, lambda: load_miniwiki(split, data_dir=data_dir))
    corpus = miniwiki_path(data_dir)
    root = Path(site_dir) if site_dir is not None else _cache_folder("miniwiki", miniwiki_site_source(corpus))
    write_miniwiki_site(corpus, root)
    return web_env(
        tasks,
        root,
        serve=serve,
        max_turns=max_turns,
        rewards=rewards,
        show_progress=show_progress,
        base_url=MINIWIKI_BASE_URL,
        **options,
    )


def web_env(
    tasks: Sequence[Task],
    site_dir: str | os.PathLike,
    *,
    serve: Serve = "files",
    max_turns: int = DEFAULT_MAX_TURNS,
    rewards: RewardWeights | dict[str, Any] | None = None,
    show_progress: bool | None = None,
    base_url: str = DEFAULT_BASE_URL,
    **options: Any,
) -> gym.Env:
    """A `WebEnv` under a `TurnLimit` over the site written in ``site_dir`` (a folder with
    ``site.json``, see `searchgym.tasks.html_site`), at ``base_url`` when read from files."""
    _check(serve, options)
    root = Path(site_dir).expanduser().resolve()
    manifest = read_manifest(root)
    source: PageSource
    if serve == "http":
        source = _ServedSite(root)
        base_url = source.base_url
    else:
        source = FileSource(root, base_url)
    searcher = _site_search(str(root), show_progress).rebased(base_url)
    evidence = {pid: urljoin(base_url, path) for pid, path in manifest["passages"].items()}
    env = WebEnv(tasks, searcher, source, rewards=reward_weights(rewards), evidence_urls=evidence, **options)
    return TurnLimit(env, max_turns)


def _check(serve: str, options: dict[str, Any]) -> None:
    """Raise `ConfigError` for an unknown ``serve`` or an option `WebEnv` does not take, before any
    site is written."""
    if serve not in SERVE:
        raise ConfigError(f"serve must be one of {', '.join(SERVE)}, got {serve!r}")
    known = set(inspect.signature(WebEnv).parameters) - _SET_BY_FACTORY
    unknown = sorted(set(options) - known)
    if unknown:
        raise ConfigError(
            f"unknown env option(s) {unknown}; the options are {sorted(known | _FACTORY_OPTIONS)}"
        )


def _cache_folder(name: str, source: dict[str, Any]) -> Path:
    digest = hashlib.sha256(json.dumps(source, sort_keys=True).encode()).hexdigest()[:16]
    return default_sites_dir() / f"{name}-{digest}"


_searches: dict[str, SiteSearch] = {}


def _site_search(root: str, show_progress: bool | None) -> SiteSearch:
    """The search index of the site in ``root``, built once per process (with a progress bar
    when ``show_progress``, or, when None, when stderr is a terminal)."""
    show_progress = sys.stderr.isatty() if show_progress is None else show_progress
    if root not in _searches:
        if len(_searches) >= MEMO_SIZE:
            _searches.pop(next(iter(_searches)))
        _searches[root] = SiteSearch.from_dir(root, DEFAULT_BASE_URL, show_progress=show_progress)
    return _searches[root]


class _ServedSite:
    """A loopback `SiteServer` for a site folder and an `HttpSource` allowed to reach exactly it;
    closing stops both."""

    def __init__(self, root: Path) -> None:
        self._server = SiteServer(root)
        self.base_url = self._server.start()
        self._http = HttpSource(allow_hosts=[self._server.host_port])

    def get(self, url: str) -> RawPage:
        return self._http.get(url)

    def close(self) -> None:
        self._http.close()
        self._server.close()
