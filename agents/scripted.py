"""Scripted baselines: an oracle that follows the gold evidence, a search-once heuristic, and a
random agent. They write actions in the env's own protocol, so they run on every env and their
trajectories can serve as supervised warm-start data."""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from searchgym.envs.protocols import ActionProtocol
from searchgym.envs.tools import ToolCall

_STOPWORDS = frozenset(
    "a an and are as at be by did does do for from has have in is it its of on or the to was "  # noqa: SIM905
    "were what when where which who whom whose why how that this with he she they his her their "
    "after before during since".split()
)
_NOT_NAMES = frozenset(
    "January February March April May June July August September October November December "  # noqa: SIM905
    "Not Founded Located Born Its It In On At After Before During Since".split()
)
_WORD_RE = re.compile(r"\w+")
_DOC_RE = re.compile(r"Doc \d+\(Title: (.*?)\) (.*?)(?=\nDoc \d+\(Title: |</information>|\Z)", re.S)
_YEAR_RE = re.compile(r"\b(1[0-9]{3}|20[0-9]{2})\b")
_NUMBER_RE = re.compile(r"\b\d[\d,.]*\b")
_NAME_RE = re.compile(r"\b[A-Z][\w'-]*(?:\s+(?:of|de|van|von|the)?\s*[A-Z][\w'-]*)*")


def _content_words(text: str) -> set[str]:
    return {w for w in _WORD_RE.findall(text.lower()) if w not in _STOPWORDS}


def parse_docs(observation: str) -> list[tuple[str, str]]:
    """``(title, text)`` of each document in a Search-R1-style observation, in rank order.

    >>> parse_docs("<information>Doc 1(Title: Paris) Capital of France.</information>")
    [('Paris', 'Capital of France.')]
    """
    return _DOC_RE.findall(observation)


def extract_answer(question: str, text: str, *, title_first: bool = False) -> str:
    """Guess the answer span in ``text``: pick the sentence sharing most words with the
    question, then the first span of the expected kind (year, number or name) that the
    question does not already contain. With ``title_first``, the text starts with the
    document's title (up to the first period), whose words do not count as overlap.

    >>> text = "Ada Quell is a poet. She was born in 1911 in Orvo."
    >>> extract_answer("In what year was Ada Quell born?", text)
    '1911'
    >>> extract_answer("Where was Ada Quell born?", text)
    'Orvo'
    """
    q_words = _content_words(question)
    topic = _content_words(text.split(".", 1)[0]) if title_first else set()
    cues = q_words - topic or q_words  # the words naming the entity are in every sentence
    sentences = [s for s in re.split(r"(?<=[.!?])\s+", text) if s.strip()] or [text]
    ranked = sorted(sentences, key=lambda s: -len(cues & _content_words(s)))
    q_lower = question.lower()
    if "year" in q_lower or q_lower.startswith("when"):
        pattern = _YEAR_RE
    elif q_lower.startswith("how many") or "population" in q_lower:
        pattern = _NUMBER_RE
    else:
        pattern = _NAME_RE
    for sentence in ranked:
        for m in pattern.finditer(sentence):
            words = m.group(0).strip(" ,.").split()
            while words and (words[0].lower() in _STOPWORDS or words[0] in _NOT_NAMES):
                words.pop(0)
            span = " ".join(words)
            if span and span.lower() not in q_lower and _content_words(span) - q_words:
                return span
    leftover = [w for w in _WORD_RE.findall(ranked[0]) if w.lower() not in q_words | _STOPWORDS]
    return " ".join(leftover[:3]) or ranked[0]


class _Scripted:
    """Common bookkeeping: the protocol and task of the episode."""

    protocol: ActionProtocol

    def reset(self, info: dict[str, Any]) -> None:
        self.protocol = info["protocol"]
        self.task = info["task"]
        self.turn = 0

    def _say(self, thought: str, tool: str, value: str) -> str:
        (param,) = (p.name for t in self.protocol.tools if t.name == tool for p in t.params)
        call = self.protocol.format_call(ToolCall(tool, {param: value}))
        return f"<think>{thought}</think>\n{call}"


class OracleAgent(_Scripted):
    """Searches the gold evidence chain hop by hop (``metadata["chain"][i]["query"]`` where the
    task has one, else the question once), then gives the first gold answer.

    With ``p_verify`` > 0 it is a wasteful oracle: in that share of episodes (drawn from
    ``seed``) it searches the question once more before answering, a search that adds nothing.
    Warm-started on it, a policy over-searches, which a cost reward should train away."""

    def __init__(self, p_verify: float = 0.0, seed: int = 0) -> None:
        self.p_verify = p_verify
        self.rng = np.random.default_rng(seed)

    def reset(self, info: dict[str, Any]) -> None:
        super().reset(info)
        chain = self.task.metadata.get("chain") or []
        self.queries = [hop["query"] for hop in chain if hop.get("query")] or [self.task.question]
        self.verify = self.p_verify > 0 and self.rng.random() < self.p_verify

    def act(self, observation: str) -> str:
        self.turn += 1
        if self.turn <= len(self.queries):
            query = self.queries[self.turn - 1]
            return self._say(f"Step {self.turn}: I need to find out about {query}.", "search", query)
        if self.verify and self.turn == len(self.queries) + 1:
            return self._say("Let me check the answer once more.", "search", self.task.question)
        return self._say("I have found everything I need.", "answer", self.task.answers[0])


class HeuristicAgent(_Scripted):
    """Searches the question once and answers with a span of the top document."""

    def act(self, observation: str) -> str:
        self.turn += 1
        if self.turn == 1:
            return self._say("Let me search the question.", "search", self.task.question)
        docs = parse_docs(observation)
        if not docs:
            return self._say("Nothing was found.", "answer", "unknown")
        title, text = docs[0]
        answer = extract_answer(self.task.question, f"{title}. {text}", title_first=True)
        return self._say(f"The top document is about {title}.", "answer", answer)


class RandomAgent(_Scripted):
    """Random searches (a few words of the question) and a random answer (a word seen in the
    results), seeded so that runs repeat."""

    def __init__(self, seed: int = 0, p_answer: float = 0.4) -> None:
        self.rng = np.random.default_rng(seed)
        self.p_answer = p_answer

    def reset(self, info: dict[str, Any]) -> None:
        super().reset(info)
        self.seen = _WORD_RE.findall(self.task.question)

    def act(self, observation: str) -> str:
        self.turn += 1
        self.seen += _WORD_RE.findall(" ".join(text for _, text in parse_docs(observation)))
        if self.turn > 1 and self.rng.random() < self.p_answer:
            return self._say("I will guess.", "answer", str(self.rng.choice(self.seen)))
        words = self.rng.choice(self.seen, size=min(3, len(self.seen)), replace=False)
        return self._say("Let me search something.", "search", " ".join(words))
