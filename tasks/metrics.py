"""Answer metrics as Search-R1 and FlashRAG use them: SQuAD-style normalisation, exact match,
token F1 and cover-EM (a gold answer contained in the prediction).

Every metric takes the prediction and a sequence of gold answers and returns the best score over
the gold answers. Passing a bare string as ``answers`` is a `TypeError`: iterating it would score
the prediction against each character.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

_ASCII_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(?:a|an|the)\b")


@dataclass(frozen=True)
class AnswerScores:
    """All answer metrics for one prediction, each the maximum over the gold answers."""

    em: float
    f1: float
    cover_em: float


@lru_cache(maxsize=4096)
def _is_punctuation(char: str) -> bool:
    return char in _ASCII_PUNCTUATION or unicodedata.category(char).startswith("P")


def normalize_answer(s: str) -> str:
    """Normalise an answer the SQuAD way, extended to Unicode.

    NFKC-normalise and casefold, delete punctuation (ASCII and every Unicode ``P*`` character),
    drop the articles a/an/the and squeeze whitespace. Accented letters are kept.

    >>> normalize_answer("  The  Eiffel-Tower! ")
    'eiffeltower'
    >>> normalize_answer("«Café» — ＡＢＣ")
    'café abc'
    """
    s = unicodedata.normalize("NFKC", s).casefold()
    s = "".join(char for char in s if not _is_punctuation(char))
    # Casefolding ("ß" + acute -> "ss" + acute) and deleting punctuation ("l·" + acute -> "l" +
    # acute) can leave a combining mark that composes with its new neighbour: normalise again so
    # that normalize_answer(normalize_answer(s)) == normalize_answer(s).
    s = unicodedata.normalize("NFKC", s)
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


def _check_inputs(prediction: str, answers: Sequence[str]) -> list[str]:
    if not isinstance(prediction, str):
        raise TypeError(f"prediction must be a str, got {type(prediction).__name__}")
    if isinstance(answers, str):
        raise TypeError(
            f"answers must be a list of strings, got the single string {answers!r}; "
            f"pass a list such as [{answers!r}] (iterating a string scores each character)"
        )
    gold = list(answers)
    if not gold:
        raise ValueError("answers is empty; pass at least one gold answer")
    for answer in gold:
        if not isinstance(answer, str):
            raise TypeError(f"every gold answer must be a str, got {answer!r}")
    return gold


def _tokens(text: str) -> list[str]:
    return normalize_answer(text).split()


def _em_tokens(pred: list[str], gold: list[str]) -> float:
    return float(pred == gold)


def _f1_tokens(pred: list[str], gold: list[str]) -> float:
    if not pred or not gold:
        return float(pred == gold)
    overlap = sum((Counter(pred) & Counter(gold)).values())
    if overlap == 0:
        return 0.0
    precision = overlap / len(pred)
    recall = overlap / len(gold)
    return 2 * precision * recall / (precision + recall)


def _cover_tokens(pred: list[str], gold: list[str]) -> float:
    if not pred or not gold:
        return float(pred == gold)
    width = len(gold)
    return float(any(pred[i : i + width] == gold for i in range(len(pred) - width + 1)))


def exact_match(prediction: str, answers: Sequence[str]) -> float:
    """1.0 if the normalised prediction equals some normalised gold answer, else 0.0.

    >>> exact_match("The Beatles.", ["beatles", "Fab Four"])
    1.0
    """
    gold = _check_inputs(prediction, answers)
    pred = _tokens(prediction)
    return max(_em_tokens(pred, _tokens(answer)) for answer in gold)


def f1(prediction: str, answers: Sequence[str]) -> float:
    """SQuAD token F1 between prediction and gold answer (bag-of-tokens overlap), max over golds.

    >>> f1("Barack Obama", ["Obama"])  # precision 1/2, recall 1/1
    0.6666666666666666
    """
    gold = _check_inputs(prediction, answers)
    pred = _tokens(prediction)
    return max(_f1_tokens(pred, _tokens(answer)) for answer in gold)


def cover_em(prediction: str, answers: Sequence[str]) -> float:
    """1.0 if some normalised gold answer occurs in the normalised prediction at token boundaries.

    >>> cover_em("It was released in 1932.", ["1932"])
    1.0
    >>> cover_em("It was released in 1932.", ["1"])
    0.0
    """
    gold = _check_inputs(prediction, answers)
    pred = _tokens(prediction)
    return max(_cover_tokens(pred, _tokens(answer)) for answer in gold)


def score_answer(prediction: str, answers: Sequence[str]) -> AnswerScores:
    """Exact match, F1 and cover-EM in one call, normalising each string once.

    >>> score_answer("Paris, France", ["Paris"])
    AnswerScores(em=0.0, f1=0.6666666666666666, cover_em=1.0)
    """
    gold = [_tokens(answer) for answer in _check_inputs(prediction, answers)]
    pred = _tokens(prediction)
    return AnswerScores(
        em=max(_em_tokens(pred, g) for g in gold),
        f1=max(_f1_tokens(pred, g) for g in gold),
        cover_em=max(_cover_tokens(pred, g) for g in gold),
    )
