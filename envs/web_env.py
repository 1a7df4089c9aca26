"""`WebEnv`: answer a question by searching the web, opening pages and following their links."""

from __future__ import annotations

import collections
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urldefrag, urljoin, urlsplit

import gymnasium as gym

from searchgym.envs.observations import count_tokens
from searchgym.envs.protocols import ActionProtocol, make_protocol
from searchgym.envs.rewards import RewardWeights, combine, format_reward, outcome_reward, search_cost
from searchgym.envs.spaces import UnicodeText
from searchgym.envs.tools import Invalid, ToolCall
from searchgym.envs.web_tools import (
    WEB_TOOLS,
    find_lines,
    format_page,
    format_results,
    paginate,
    split_page_url,
)
from searchgym.errors import RetrieverError
from searchgym.retrievers.web import Page, PageSource, WebSearcher
from searchgym.retrievers.web.extract import extract
from searchgym.tasks.metrics import score_answer
from searchgym.tasks.task import Task

MAX_OBSERVATION_CHARS = 10_000_000
PAGE_CACHE_SIZE = 64
_WORLD_FAILURES = (RetrieverError, TimeoutError, ConnectionError)
_COUNTERS = ("n_searches", "n_opens", "n_follows", "n_finds", "n_invalid", "n_extra_calls", "n_errors")


class WebEnv(gym.Env[str, str]):
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

    metadata = {"render_modes": []}

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
            raise ValueError("WebEnv needs at least one task")
        if top_k < 1 or page_tokens < 20:
            raise ValueError(f"top_k must be >= 1 and page_tokens >= 20, got {top_k}, {page_tokens}")
        self.tasks = tasks
        self.searcher = searcher
        self.source = source
        self.protocol = make_protocol(protocol, WEB_TOOLS) if isinstance(protocol, str) else protocol
        unsupported = {t.name for t in self.protocol.tools} - {t.name for t in WEB_TOOLS}
        if unsupported:
            raise ValueError(f"WebEnv has no handler for tool(s) {sorted(unsupported)}")
        self.top_k = top_k
        self.page_tokens = page_tokens
        self.rewards = rewards or RewardWeights()
        self.evidence_urls = dict(evidence_urls or {})
        self.action_space = UnicodeText(self.protocol.max_chars)
        self.observation_space = UnicodeText(MAX_OBSERVATION_CHARS)
        self._cache: collections.OrderedDict[str, tuple[Page, list[str]]] = collections.OrderedDict()
        self._task: Task | None = None
        self._done = True

    # -- Gymnasium API -----------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self._task = self._pick_task(options or {})
        self._done = False
        self._turn = 0
        self._counts = dict.fromkeys(_COUNTERS, 0) | {"obs_tokens": 0}
        self._web_calls = 0
        self._opened: set[str] = set()
        self._page: tuple[Page, list[str]] | None = None
        observation = self.protocol.instructions(self._task.question)
        info = {"task": self._task, "task_id": self._task.id, "question": self._task.question}
        return observation, {**info, "protocol": self.protocol, "turn": 0, **self._counts}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self._task is None or self._done:
            raise RuntimeError("the episode is over or was never started; call reset() first")
        if not isinstance(action, str):
            raise TypeError(f"actions are text (str), got {type(action).__name__}")
        self._turn += 1
        parsed = self.protocol.parse(action)
        info: dict[str, Any] = {"turn": self._turn, "tool": None, "error": None}
        outcome = fmt = cost = 0.0
        if isinstance(parsed, Invalid):
            self._counts["n_invalid"] += 1
            info["error"] = parsed.reason
            observation = self.protocol.format_error(parsed.reason)
        elif parsed.name == "answer":
            info["tool"] = "answer"
            self._counts["n_extra_calls"] += parsed.extra_calls
            observation, outcome, fmt, cost = self._answer(parsed, info)
        else:
            info["tool"] = parsed.name
            self._counts["n_extra_calls"] += parsed.extra_calls
            calls_before = self._web_calls
            handler = {"search": self._search, "open": self._open, "follow": self._follow, "find": self._find}
            text = handler[parsed.name](parsed.arguments, info)
            observation = self.protocol.format_result(text)
            tokens = count_tokens(observation)
            self._counts["obs_tokens"] += tokens
            info["step_obs_tokens"] = tokens
            if not self.rewards.cost_only_if_correct:
                cost = search_cost(self._web_calls - calls_before, tokens, self.rewards)
        info["reward_components"] = {"outcome": outcome, "format": fmt, "cost": cost}
        info.update(self._counts)
        return observation, combine(outcome, fmt, cost, self.rewards), self._done, False, info

    def close(self) -> None:
        """Closing is idempotent; it closes the source if the source can be closed."""
        self._done = True
        close = getattr(self.source, "close", None)
        if callable(close):
            close()

    # -- tools -------------------------------------------------------------------------------
    def _search(self, args: dict[str, str], info: dict[str, Any]) -> str:
        query = info["query"] = args["query"]
        self._counts["n_searches"] += 1
        self._web_calls += 1
        try:
            results = self.searcher.search(query, self.top_k)
        except _WORLD_FAILURES as e:
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
            except _WORLD_FAILURES as e:
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

    def _answer(self, call: ToolCall, info: dict[str, Any]) -> tuple[str, float, float, float]:
        assert self._task is not None
        prediction = call.arguments["answer"]
        scores = score_answer(prediction, self._task.answers)
        outcome = outcome_reward(prediction, self._task.answers, self.rewards.outcome_metric)
        fmt = format_reward(self._counts["n_invalid"], self._counts["n_extra_calls"])
        cost = 0.0
        if self.rewards.cost_only_if_correct and scores.em == 1.0:
            cost = search_cost(self._web_calls, self._counts["obs_tokens"], self.rewards)
        info.update(
            prediction=prediction,
            em=scores.em,
            f1=scores.f1,
            cover_em=scores.cover_em,
            evidence_recall=self._evidence_recall(),
        )
        self._done = True
        return "", outcome, fmt, cost

    def _evidence_recall(self) -> float | None:
        evidence = self._task.evidence if self._task else ()
        if not evidence or not self.evidence_urls:
            return None
        found = sum(urldefrag(self.evidence_urls.get(e, ""))[0] in self._opened for e in evidence)
        return found / len(evidence)

    def _pick_task(self, options: dict[str, Any]) -> Task:
        unknown = set(options) - {"task", "task_index"}
        if unknown:
            raise ValueError(f"unknown reset option(s) {sorted(unknown)}; use 'task' or 'task_index'")
        if "task" in options:
            task = options["task"]
            if not isinstance(task, Task):
                raise TypeError(f"options['task'] must be a Task, got {type(task).__name__}")
            return task
        if "task_index" in options:
            return self.tasks[options["task_index"]]
        return self.tasks[int(self.np_random.integers(len(self.tasks)))]
