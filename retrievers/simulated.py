"""`Simulated`: a language model plays the search engine (ZeroSearch).

For each search call the simulator draws whether this result list is *useful* (documents that
help answer the episode's question) or *noisy* (related to the query, without the answer), with a
noise probability that follows ZeroSearch's curriculum over training steps, and asks a
`TextGenerator` (any policy) to write the documents. The prompt shows the query, the user's
question and its gold answer, as ZeroSearch's does, and asks for one fixed line format that
`parse_documents` reads back; `format_documents` writes that format, so SFT targets
(`searchgym.agents.train.sft_simulator`) match what the parser expects.

The default sampling is greedy (``temperature=0``): the same prompt always gives the same
documents, which makes the on-disk cache sound and runs repeatable; the variety between calls
comes from the useful/noisy draw and the query, not from sampling noise (small simulators also
write worse text when sampled). ``max_new_tokens=640`` fits five documents of 30 to 80 words:
five passages of the generated world (55 words each on average) take 497 SmolLM2 tokens on
average, 548 at the 90th percentile (invented names split into many tokens); at 384 a fine-tuned
135M simulator stopped after three documents.
"""

from __future__ import annotations

import collections
import hashlib
import json
import numbers
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from searchgym.errors import ConfigError, PolicyError, RetrieverError
from searchgym.generation import Completion, Message, SamplingParams, TextGenerator
from searchgym.retrievers.base import Doc, SearchContext, check_batch, clean_text
from searchgym.retrievers.cached import SQLiteFile

DEFAULT_PARAMS = SamplingParams(max_new_tokens=640, temperature=0.0)
_MAX_TITLE_CHARS = 200
_REMEMBERED_DOCS = 10_000  # generated documents `doc()` can still return


def noise_probability(
    step: int, total_steps: int, *, p_start: float = 0.0, p_end: float = 0.5, base: float = 4.0
) -> float:
    """ZeroSearch's curriculum: ``p_s + (b**(i/m) - 1) / (b - 1) * (p_e - p_s)`` at step ``i`` of
    ``m``; steps past ``m`` stay at ``p_end``. ``base`` 1 is the limit of the formula (linear).

    >>> noise_probability(0, 100), noise_probability(100, 100), noise_probability(50, 100)
    (0.0, 0.5, 0.16666666666666666)
    """
    _check_step(step)
    if isinstance(total_steps, bool) or not isinstance(total_steps, numbers.Integral) or total_steps < 1:
        raise ConfigError(f"total_steps must be a positive integer, got {total_steps!r}")
    frac = min(step, total_steps) / total_steps
    rise = frac if base == 1 else (base**frac - 1) / (base - 1)
    return p_start + rise * (p_end - p_start)


def _check_step(step: object) -> None:
    if isinstance(step, bool) or not isinstance(step, numbers.Integral) or step < 0:
        raise ConfigError(f"step must be a non-negative integer, got {step!r}")


@dataclass(frozen=True)
class NoiseCurriculum:
    """The probability of a noisy result list rises from ``p_start`` at step 0 to ``p_end`` at
    ``total_steps`` (ZeroSearch: 0 → 0.5 with ``base`` 4, i.e. slowly at first)."""

    total_steps: int
    p_start: float = 0.0
    p_end: float = 0.5
    base: float = 4.0

    def __post_init__(self) -> None:
        if (
            isinstance(self.total_steps, bool)
            or not isinstance(self.total_steps, int)
            or self.total_steps < 1
        ):
            raise ConfigError(f"total_steps must be a positive integer, got {self.total_steps!r}")
        for name in ("p_start", "p_end"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ConfigError(f"{name} is a probability in [0, 1], got {getattr(self, name)!r}")
        if not self.base > 0:
            raise ConfigError(f"base must be positive (ZeroSearch uses 4), got {self.base!r}")

    def probability(self, step: int) -> float:
        """The noise probability at training step ``step``."""
        return noise_probability(
            step, self.total_steps, p_start=self.p_start, p_end=self.p_end, base=self.base
        )


# -- prompts -------------------------------------------------------------------------------------
_INTRO = (
    "You are a web search engine. For the search query below, write {k} short documents of the kind "
    "a search engine returns."
)
_GOAL = {  # (mode, whether the prompt shows the question and answer) -> what the documents must be
    ("useful", True): "The documents must be useful: together they should contain the information "
    "needed to answer the question.",
    ("noisy", True): "The documents must be noisy: related to the query, but none of them may contain "
    "or imply the correct answer.",
    ("useful", False): "The documents must be useful: they should answer the query with accurate, "
    "specific facts.",
    ("noisy", False): "The documents must be noisy: related to the query, but none of them may answer it.",
}
_FORMAT = (
    "Write each document as an encyclopedia-style passage of 30 to 80 words with a short title. Use "
    "exactly this format, one document per line, and write nothing else:"
)


def simulator_messages(
    query: str, k: int, *, noisy: bool, context: SearchContext | None = None
) -> list[Message]:
    """The conversation asking for ``k`` useful or noisy documents for ``query``. With a
    ``context`` the prompt names the user's question and its gold answer (ZeroSearch); without
    one it holds the query alone.

    >>> print(simulator_messages("capital of France", 2, noisy=False)[0]["content"].splitlines()[-1])
    Query: capital of France
    """
    mode = "noisy" if noisy else "useful"
    lines = [_INTRO.format(k=k), ""]
    if context is not None:
        lines += [f"A user is trying to answer the question: {context.question}"]
        lines += [f"The correct answer is: {' / '.join(context.answers) or 'unknown'}", ""]
    lines += [_GOAL[mode, context is not None], "", _FORMAT]
    lines += [f"Doc {i} (Title: <title>): <text>" for i in range(1, k + 1)]
    lines += ["", f"Query: {query}"]
    return [{"role": "user", "content": clean_text("\n".join(lines))}]  # a model's tokenizer reads it


# -- the output format ---------------------------------------------------------------------------
def format_documents(docs: Sequence[Doc], *, max_doc_chars: int = 600) -> str:
    """The documents in the format the prompt asks for and `parse_documents` reads.

    >>> format_documents([Doc("a", "Paris", "Capital of\\nFrance.")])
    'Doc 1 (Title: Paris): Capital of France.'
    """
    return "\n".join(
        f"Doc {i} (Title: {_squeeze(d.title)}): {_cut(_squeeze(d.text), max_doc_chars)}"
        for i, d in enumerate(docs, 1)
    )


_SPECIAL_TOKEN = re.compile(r"<\|[^|<>\s]{1,40}\|>")  # chat-template tokens such as <|im_end|>
_HEADER = re.compile(
    r"^[ \t>*#_\-]*(?:"  # at the start of a line, after bullets or markdown
    r"(?:doc(?:ument)?|passage|result)[ \t]*(?:#|no\.)?[ \t]*\d{1,3}(?!\d)"  # Doc 1, Document #2, Doc3
    r"|\[\d{1,3}\]"  # [1]
    r"|\d{1,3}[.):](?=\s)"  # 1.  1)  1:
    r")|(?<=\s)doc[ \t]*\d{1,3}(?=[ \t]*\(\s*title\s*:)",  # or mid-line: ... Doc 2 (Title: t)
    re.IGNORECASE | re.MULTILINE,
)
_TITLE_PAREN = re.compile(r"\(\s*title\s*:\s*", re.IGNORECASE)
_TITLE_LINE = re.compile(r"title\s*:[ \t*]*", re.IGNORECASE)
_TEXT_LABEL = re.compile(r"(?:text|content)\s*:\s*", re.IGNORECASE)
_PUNCT = " \t\r\n*:.-–—"
_WORD = re.compile(r"[^\W\d_]{2}")  # two letters in a row: the least a document has


def parse_documents(text: str, query: str, k: int, *, max_doc_chars: int = 600) -> list[Doc]:
    """Read at most ``k`` documents out of a simulator's output.

    Documents start at numbered lines (``Doc 1 (Title: t): text``, Search-R1's ``Doc 1(Title: t)``,
    ``Document 2:``, ``[3]``, ``4.``, ``5)``, with or without markdown bold or a title), or at
    ``Doc n (Title:`` inside a line; text before the first one is preamble and dropped. Output
    without numbered lines is one document. Texts are cut at ``max_doc_chars`` on a word
    boundary; documents without words and repeats are dropped; chat-template tokens
    (``<|im_end|>``) are removed, protocol tags are kept (the env escapes them). Ids are ``sim-``
    + a hash of (query, text); scores fall with rank.

    >>> [(d.title, d.text) for d in parse_documents("Doc 1 (Title: Paris (city)): Capital.", "q", 3)]
    [('Paris (city)', 'Capital.')]
    """
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    text = _SPECIAL_TOKEN.sub(" ", clean_text(text))  # a server's JSON "\ud800" is a lone surrogate
    starts = [m.end() for m in _HEADER.finditer(text)]
    ends = [m.start() for m in _HEADER.finditer(text)][1:] + [len(text)]
    segments = [text[s:e] for s, e in zip(starts, ends)] if starts else [text]
    docs: list[Doc] = []
    seen: set[str] = set()
    for segment in segments:
        title, body = _split_title(segment) if starts else ("", segment)
        body = _cut(_body(body), max_doc_chars)
        key = body.casefold()
        if not _WORD.search(body) or key in seen:
            continue
        seen.add(key)
        digest = hashlib.sha256(clean_text(f"{query}\x1f{body}").encode()).hexdigest()[:16]
        docs.append(Doc(f"sim-{digest}", title, body, score=1.0 / (len(docs) + 1)))
        if len(docs) == k:
            break
    return docs


def _split_title(segment: str) -> tuple[str, str]:
    """``(title, rest)`` of one document's text after its number."""
    s = segment.lstrip(_PUNCT)
    m = _TITLE_PAREN.match(s)
    if m:  # (Title: ...) with balanced parentheses: world titles read "Name (career)"
        depth, i = 1, m.end()
        while i < len(s) and depth:
            depth += {"(": 1, ")": -1}.get(s[i], 0)
            i += 1
        if depth == 0:
            return _clean_title(s[m.end() : i - 1]), s[i:]
        line, _, rest = s[m.end() :].partition("\n")  # unclosed: the title ends with the line
        return _clean_title(line), rest
    m = _TITLE_LINE.match(s)
    if m:  # Title: ... on its own line
        line, _, rest = s[m.end() :].partition("\n")
        return _clean_title(line), rest
    return "", s


def _body(raw: str) -> str:
    """A document's text: separators and a ``Text:`` label before it dropped, spaces squeezed."""
    body = raw.lstrip(_PUNCT).rstrip()
    label = _TEXT_LABEL.match(body)
    return _squeeze(body[label.end() :] if label else body)


def _clean_title(title: str) -> str:
    return _squeeze(title).strip(" *\"'")[:_MAX_TITLE_CHARS]


def _squeeze(text: str) -> str:
    return " ".join(text.split())


def _cut(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, at a space when there is one in the second half."""
    if len(text) <= limit:
        return text
    space = text.rfind(" ", 0, limit + 1)
    return (text[:space] if space > limit // 2 else text[:limit]).rstrip()


# -- the retriever -------------------------------------------------------------------------------
class Simulated:
    """A search engine simulated by ``generator`` (any `TextGenerator`, e.g. a policy).

    Each search call draws u ~ U(0, 1) from the retriever's own generator (seeded by ``seed``)
    and is noisy when u < p, where p is ``noise`` (a constant) or a `NoiseCurriculum` read at the
    step set with `set_step`. The prompt asks for ``max(k, k_docs)`` documents (ZeroSearch asks
    five) and a search returns the first ``k`` that parse (fewer when the model wrote fewer).
    `search_in_context` shows the episode's question and gold answer to the simulator; `search`
    has only the query. ``n_searches``, ``n_noisy`` and ``last_noisy`` (the draws of the last
    call, one per query) let a trainer log the noisy share.

    ``cache`` names an SQLite file (WAL mode, shareable by several processes) that memoises the
    documents per (namespace, useful/noisy, query, question, answers, number asked); it requires
    a ``namespace`` naming the simulator model and its settings, so two simulators never share
    answers. ``doc(id)`` returns a document this instance generated or read from the cache
    recently, else None.
    """

    def __init__(
        self,
        generator: TextGenerator,
        *,
        params: SamplingParams | None = None,
        k_docs: int = 5,
        noise: float | NoiseCurriculum = 0.0,
        seed: int = 0,
        cache: str | os.PathLike | None = None,
        namespace: str = "",
        max_doc_chars: int = 600,
    ) -> None:
        if not isinstance(generator, TextGenerator):
            raise ConfigError(f"generator must have a chat(conversations, params) method, got {generator!r}")
        if isinstance(k_docs, bool) or not isinstance(k_docs, int) or k_docs < 1:
            raise ConfigError(f"k_docs must be a positive integer, got {k_docs!r}")
        if not isinstance(noise, NoiseCurriculum) and not (
            isinstance(noise, (int, float)) and 0.0 <= noise <= 1.0
        ):
            raise ConfigError(f"noise must be a probability in [0, 1] or a NoiseCurriculum, got {noise!r}")
        if isinstance(max_doc_chars, bool) or not isinstance(max_doc_chars, int) or max_doc_chars < 20:
            raise ConfigError(f"max_doc_chars must be an integer >= 20, got {max_doc_chars!r}")
        if cache is not None and not namespace:
            raise ConfigError(
                "give the cache a namespace naming the simulator, e.g. 'smollm2-135m-sft-greedy'"
            )
        self.generator = generator
        self.params = params or DEFAULT_PARAMS
        self.k_docs, self.noise, self.max_doc_chars = k_docs, noise, max_doc_chars
        self.namespace = namespace
        self._rng = np.random.default_rng(seed)
        self._cache = _DocCache(Path(cache)) if cache is not None else None
        self._docs: collections.OrderedDict[str, Doc] = collections.OrderedDict()
        self.step = 0
        self.n_searches = self.n_noisy = 0
        self.last_noisy: list[bool] = []
        self.hits = self.misses = 0

    @property
    def noise_probability(self) -> float:
        """The probability that a search at the current step is noisy."""
        if isinstance(self.noise, NoiseCurriculum):
            return self.noise.probability(self.step)
        return float(self.noise)

    def set_step(self, step: int) -> None:
        """Set the training step the noise curriculum reads."""
        _check_step(step)
        self.step = int(step)

    def search(self, query: str, k: int = 3) -> list[Doc]:
        return self.batch_search_in_context([query], k, [None])[0]

    def batch_search(self, queries: Sequence[str], k: int = 3) -> list[list[Doc]]:
        check_batch(queries, k)
        return self.batch_search_in_context(queries, k, [None] * len(queries))

    def search_in_context(self, query: str, k: int, context: SearchContext) -> list[Doc]:
        return self.batch_search_in_context([query], k, [context])[0]

    def batch_search_in_context(
        self, queries: Sequence[str], k: int, contexts: Sequence[SearchContext | None]
    ) -> list[list[Doc]]:
        """One search per query, each with its context (None: the query alone), answered with
        one ``generator.chat`` call for every query the cache does not hold."""
        check_batch(queries, k)
        if len(contexts) != len(queries):
            raise ValueError(f"got {len(queries)} queries but {len(contexts)} contexts")
        p = self.noise_probability
        noisy = [bool(u < p) for u in self._rng.random(len(queries))]  # one draw per call, always
        self.last_noisy = noisy
        self.n_searches += len(queries)
        self.n_noisy += sum(noisy)
        n_ask = max(k, self.k_docs)
        keys = [_Key(q, n, c) for q, n, c in zip(queries, noisy, contexts)]
        found = self._cache.get(self.namespace, set(keys), n_ask) if self._cache else {}
        missing = [key for key in dict.fromkeys(keys) if key not in found and key.query.strip()]
        self.hits += len({key for key in keys if key in found})
        self.misses += len(missing)
        if missing:
            fresh = self._generate(missing, n_ask)
            if self._cache:
                self._cache.put(self.namespace, fresh, n_ask)
            found.update(fresh)
        out = [list(found.get(key, []))[:k] for key in keys]
        for docs in out:
            self._remember(docs)
        return out

    def _generate(self, keys: list[_Key], n_ask: int) -> dict[_Key, list[Doc]]:
        conversations = [
            simulator_messages(key.query, n_ask, noisy=key.noisy, context=key.context) for key in keys
        ]
        try:
            completions = self.generator.chat(conversations, self.params)
        except PolicyError as e:
            raise RetrieverError(f"the simulator could not generate: {e}") from e
        if len(completions) != len(keys):
            raise RetrieverError(f"the simulator answered {len(completions)} of {len(keys)} prompts")
        return {
            key: parse_documents(c.text, key.query, n_ask, max_doc_chars=self.max_doc_chars)
            for key, c in zip(keys, completions)
        }

    def _remember(self, docs: list[Doc]) -> None:
        for d in docs:
            self._docs[d.id] = d
            self._docs.move_to_end(d.id)
        while len(self._docs) > _REMEMBERED_DOCS:
            self._docs.popitem(last=False)

    def doc(self, doc_id: str) -> Doc | None:
        return self._docs.get(doc_id)

    def close(self) -> None:
        if self._cache:
            self._cache.close()


class WritingProgress:
    """A `TextGenerator` that shows a bar on stderr while ``generator`` writes a search's
    documents, cleared when the call returns: under an eval's bar of episodes, it says what the
    minutes of a simulated search go to. ``searchgym eval --simulator`` wraps its model in it
    unless ``--no-progress``; `Simulated` itself prints nothing."""

    def __init__(self, generator: TextGenerator, desc: str = "simulator writing documents") -> None:
        if not isinstance(generator, TextGenerator):
            raise ConfigError(f"generator must have a chat(conversations, params) method, got {generator!r}")
        self.generator, self.desc = generator, desc

    def chat(self, conversations: Sequence[Sequence[Message]], params: SamplingParams) -> list[Completion]:
        from tqdm.auto import tqdm

        n = len(conversations)
        with tqdm(total=n, desc=self.desc, unit="search", leave=False, file=sys.stderr) as bar:
            completions = self.generator.chat(conversations, params)
            bar.update(n)
        return completions


@dataclass(frozen=True)
class _Key:
    """What one generation depends on besides the number of documents asked."""

    query: str
    noisy: bool
    context: SearchContext | None

    def columns(self) -> tuple[str, str, str, str]:
        question = self.context.question if self.context else ""
        answers = json.dumps(list(self.context.answers) if self.context else None, ensure_ascii=False)
        return ("noisy" if self.noisy else "useful", self.query, question, answers)


_SCHEMA = """CREATE TABLE IF NOT EXISTS simulated (
    namespace TEXT NOT NULL, mode TEXT NOT NULL, query TEXT NOT NULL, question TEXT NOT NULL,
    answers TEXT NOT NULL, k INTEGER NOT NULL, docs TEXT NOT NULL,
    PRIMARY KEY (namespace, mode, query, question, answers, k))"""


class _DocCache:
    """Generated documents on disk, in SQLite's WAL mode as `Cached` keeps its memo (readers
    never block; several processes can share the file); one connection per thread."""

    def __init__(self, path: Path) -> None:
        self._file = SQLiteFile(path, _SCHEMA)
        self._db = self._file.connection

    def get(self, namespace: str, keys: set[_Key], k: int) -> dict[_Key, list[Doc]]:
        db, found = self._db(), {}
        for key in keys:
            row = db.execute(
                "SELECT docs FROM simulated WHERE namespace=? AND mode=? AND query=? AND question=? "
                "AND answers=? AND k=?",
                (namespace, *key.columns(), k),
            ).fetchone()
            if row is not None:
                found[key] = [Doc(**d) for d in json.loads(row[0])]
        return found

    def put(self, namespace: str, entries: dict[_Key, list[Doc]], k: int) -> None:
        rows = [
            (namespace, *key.columns(), k, json.dumps([d.__dict__ for d in docs], ensure_ascii=False))
            for key, docs in entries.items()
        ]
        with self._db() as db:
            db.executemany("INSERT OR REPLACE INTO simulated VALUES (?, ?, ?, ?, ?, ?, ?)", rows)

    def close(self) -> None:
        self._file.close()
