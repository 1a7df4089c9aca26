"""`WebEnv`: answer a question by searching the web, opening pages and following their links."""

from __future__ import annotations

import collections
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urldefrag, urljoin, urlsplit

from searchgym.config_types import check_int
from searchgym.envs.protocols import ActionProtocol, make_protocol
from searchgym.envs.rewards import RewardWeights, usage
from searchgym.envs.text_env import MAX_OBSERVATION_CHARS as MAX_OBSERVATION_CHARS
from searchgym.envs.text_env import WORLD_FAILURES, Charges, TextEnv
from searchgym.envs.tools import ToolCall
from searchgym.envs.web_tools import (
    WEB_TOOLS,
    find_lines,
    format_page,
    format_results,
    paginate,
    split_page_url,
)
from searchgym.errors import ConfigError, RetrieverError
from searchgym.retrievers.web import Page, PageSource, WebSearcher
from searchgym.retrievers.web.extract import extract
from searchgym.tasks.task import Task

PAGE_CACHE_SIZE = 64


class WebEnv(TextEnv):
    """A question and a web: ``search(query)``, ``open(url)``, ``follow(link)``, ``find(text)``
    and ``answer(answer)`` (tools in `searchgym.envs.web_tools`).

    ``searcher`` answers searches; ``source`` gives pages, which are extracted to text with
    numbered links and split into parts of at most ``page_tokens`` tokens (``open(url#page=N)``
    reads part N; nothing is cut). ``evidence_urls`` maps passage ids to the URL of the page that
    holds them; evidence recall is then the share of the task's evidence whose page was opened.

    Costs: every call that reaches the web (search, open, follow) costs ``per_search``, and every
    tool observation its tokens (``per_1k_obs_tokens``); ``find`` reads the open page and pays
    only for its tokens. A failure of the web (a 404, a refused address, a timeout) or a bad
    link number is an observation and a counted error (``n_errors``), never the episode's end.

    ``info`` has SearchEnv's keys (``reward_components``, ``n_searches``, ``n_invalid``,
    ``n_extra_calls``, ``n_errors``, ``obs_tokens``, ``tool``, ``error``; at the answer
    ``prediction``, ``em``, ``f1``, ``cover_em``, ``evidence_recall``) and ``n_opens`` (pages
    fetched by open or follow), ``n_follows``, ``n_finds`` and, after a page is shown, ``url``
    and ``part``. `close` closes the source (a loopback server it owns stops).
    """

    _counters = (
        "n_searches",
        "n_opens",
        "n_follows",
        "n_finds",
        "n_invalid",
        "n_extra_calls",
        "n_errors",
        "obs_tokens",
    )

    def __init__(
        self,
        tasks: Sequence[Task],
        searcher: WebSearcher,
        source: PageSource,
        *,
        protocol: str | ActionProtocol = "tags",
        top_k: int = 5,
        page_tokens: int = 600,
        rewards: RewardWeights | None = None,
        evidence_urls: Mapping[str, str] | None = None,
    ) -> None:
        if not tasks:
            raise ConfigError("WebEnv needs at least one task")
        check_int("top_k", top_k)
        check_int("page_tokens", page_tokens, 20)
        protocol = make_protocol(protocol, WEB_TOOLS) if isinstance(protocol, str) else protocol
        unsupported = {t.name for t in protocol.tools} - {t.name for t in WEB_TOOLS}
        if unsupported:
            raise ValueError(f"WebEnv has no handler for tool(s) {sorted(unsupported)}")
        super().__init__(tasks, protocol, rewards or RewardWeights())
        self.searcher = searcher
        self.source = source
        self.top_k = top_k
        self.page_tokens = page_tokens
        self.evidence_urls = dict(evidence_urls or {})
        self._cache: collections.OrderedDict[str, tuple[Page, list[str]]] = collections.OrderedDict()

    def close(self) -> None:
        """Closing is idempotent; it closes the source if the source can be closed."""
        super().close()
        close = getattr(self.source, "close", None)
        if callable(close):
            close()

    def _new_episode(self) -> None:
        self._web_calls = 0
        self._opened: set[str] = set()
        self._page: tuple[Page, list[str]] | None = None

    # -- tools -------------------------------------------------------------------------------
    def _call(self, call: ToolCall, info: dict[str, Any]) -> tuple[str, float, float, Charges]:
        if call.name == "answer":
            return "", *self._score_answer(call.arguments["answer"], info)
        calls_before = self._web_calls
        handler = {"search": self._search, "open": self._open, "follow": self._follow, "find": self._find}
        text = handler[call.name](call.arguments, info)
        observation, charges = self._result(text, self._web_calls - calls_before, info)
        return observation, 0.0, 0.0, charges

    def _search(self, args: dict[str, str], info: dict[str, Any]) -> str:
        query = info["query"] = args["query"]
        self._counts["n_searches"] += 1
        self._web_calls += 1
        try:
            results = self.searcher.search(query, self.top_k)
        except WORLD_FAILURES as e:
            return self._error(
                info, f"Search failed ({type(e).__name__}: {e}). You may retry or search differently."
            )
        results = results[: self.top_k]
        info["urls"] = [r.url for r in results]
        return format_results(results)

    def _open(self, args: dict[str, str], info: dict[str, Any]) -> str:
        given = args["url"].strip().strip("<>\"'")
        try:
            url, part = split_page_url(given)
            if self._page is not None:
                url = urljoin(self._page[0].url, url)
            scheme = urlsplit(url).scheme
        except ValueError:  # e.g. an unclosed IPv6 bracket
            url, scheme = given, ""
        if scheme not in ("http", "https"):
            return self._error(
                info, f"Cannot open {url!r}: give a full URL such as https://example.org/page."
            )
        return self._show(url, part or 1, info)

    def _follow(self, args: dict[str, str], info: dict[str, Any]) -> str:
        self._counts["n_follows"] += 1
        if self._page is None:
            return self._error(info, "No page is open: open a page before following its links.")
        links = self._page[0].links
        raw = args["link"].strip().strip("[]").strip()
        if not (raw.isascii() and raw.isdigit() and len(raw) < 10):
            return self._error(info, f"follow takes a link number such as 3, not {args['link']!r}.")
        n = int(raw)
        if not 1 <= n <= len(links):
            valid = f"links [1] to [{len(links)}]" if links else "no links"
            return self._error(info, f"There is no link [{n}]: the open page has {valid}.")
        info["link"] = n
        return self._show(links[n - 1].url, 1, info)

    def _find(self, args: dict[str, str], info: dict[str, Any]) -> str:
        self._counts["n_finds"] += 1
        if self._page is None:
            return self._error(info, "No page is open: open a page before finding text on it.")
        return find_lines(self._page[1], args["text"])

    def _show(self, url: str, part: int, info: dict[str, Any]) -> str:
        """Fetch (or reuse) the page at ``url`` and show part ``part``."""
        key = urldefrag(url)[0]
        if key not in self._cache:
            self._counts["n_opens"] += 1
            self._web_calls += 1
            try:
                page = extract(self.source.get(key))
            except WORLD_FAILURES as e:
                why = str(e) if isinstance(e, RetrieverError) else f"{type(e).__name__}: {e}"
                return self._error(info, f"Could not open {key} ({why}).")
            self._cache[key] = (page, paginate(page.text, self.page_tokens))
            while len(self._cache) > PAGE_CACHE_SIZE:
                self._cache.popitem(last=False)
        elif key not in self._opened:
            self._counts["n_opens"] += 1
            self._web_calls += 1
        self._cache.move_to_end(key)
        page, parts = self._cache[key]
        if not 1 <= part <= len(parts):
            return self._error(info, f"{key} has parts 1 to {len(parts)}; there is no part {part}.")
        self._page = (page, parts)
        self._opened.update({key, urldefrag(page.url)[0]})
        info.update(url=key, part=part)
        return format_page(page, parts, part)

    def _error(self, info: dict[str, Any], message: str) -> str:
        self._counts["n_errors"] += 1
        info["error"] = message
        return message

    def _episode_charges(self) -> Charges:
        return usage(self._web_calls, self._counts["obs_tokens"])

    def _evidence_recall(self) -> float | None:
        evidence = self._task.evidence if self._task else ()
        if not evidence or not self.evidence_urls:
            return None
        found = sum(urldefrag(self.evidence_urls.get(e, ""))[0] in self._opened for e in evidence)
        return found / len(evidence)
