"""Model-free extractive reading: the answer span a text holds for a question.

Shared by the scripted agents (`searchgym.agents.scripted.baselines`) and the planner env's default
frozen generator (`searchgym.envs.reader.ExtractiveReader`), so it lives in the bottom layer.
It reads text only; it never looks at gold answers.
"""

from __future__ import annotations

import re

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
