"""Lucene's English analysis in Python, so that `BM25` finds what pyserini (Anserini) finds.

Anserini's default analyzer, and Lucene's ``EnglishAnalyzer``, run: ``StandardTokenizer`` (Unicode
word boundaries, UAX #29: ``U.S.A.`` -> ``u.s.a``, ``1,867.5`` stays whole, hyphens split, one-letter
words and numbers kept, each Han or Hiragana character a word), ``EnglishPossessiveFilter``
(``John's`` -> ``John``), lower-casing, Lucene's 33 English stopwords, and Lucene's Porter stemmer.
`LuceneAnalyzer` follows them with a regular expression and PyStemmer's Porter stemmer, patched
where Lucene's stemmer departs from the published algorithm (``-logi`` -> ``-log``, ``-bli`` ->
``-ble``, words of one or two letters kept). On 10,033 Wikipedia lead paragraphs it gives
Lucene's exact terms for all but 8 paragraphs (emoji-like symbols, which Lucene keeps as words,
and doubled consonants other than ``bb dd ff gg mm nn pp rr tt`` before ``-ed`` / ``-ing``).

>>> LuceneAnalyzer()("John's trip to the U.S.A., e.g. New York: 8,804,190 people")
['john', 'trip', 'u.s.a', 'e.g', 'new', 'york', '8,804,190', 'peopl']
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator
from itertools import chain

import Stemmer

# Lucene's EnglishAnalyzer.ENGLISH_STOP_WORDS_SET, which Anserini uses.
LUCENE_STOPWORDS = frozenset(
    {
        "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it",
        "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these", "they",
        "this", "to", "was", "will", "with",
    }
)  # fmt: skip

_MARKS = "\u0300-\u036f\u0591-\u05c7\u0610-\u061a\u064b-\u065f\u0670\u06d6-\u06ed\u0900-\u0dff\u1000-\u109f"
_INSIDE = "\u00ad\u200d\u2060\u202f"  # invisible format characters and U+202F, which stay in a word
_PART = rf"[\w{_MARKS}{_INSIDE}]"
# A word starts with a letter or digit; '.', ':', "'" and the like join letters, ',' '.' ';' join digits.
_WORD = re.compile(
    rf"[^\W_]{_PART}*(?:(?:"
    r"(?<=[^\W\d_])[.:'\u00b7\u0387\u05f4\u2018\u2019\u2027](?=[^\W\d_])"
    r"|(?<=[\u05d0-\u05ea])\"(?=[\u05d0-\u05ea])"
    r"|(?<=\d)[.,;'\u2018\u2019\u2044](?=\d)"
    rf"){_PART}+)*"
)
_IDEOGRAPH = re.compile(r"[\u3040-\u309f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f]")
# Number forms that are not digits to Unicode word breaking (superscripts, fractions): not words.
_NOT_WORDS = "\u00b2\u00b3\u00b9\u00bc\u00bd\u00be" + "".join(
    map(chr, (*range(0x2070, 0x20A0), *range(0x2150, 0x2190)))
)
# Characters that never belong to a word nor join two words: turned into spaces before splitting.
_BREAKS = "\t\n\r !#$%&()*+-/<=>?@[\\]^`{|}~\u00a0\u2013\u2014\u201c\u201d" + _NOT_WORDS
_BREAK_TABLE = str.maketrans({c: " " for c in _BREAKS})
_VOWELS = frozenset("aeiou")


def _measure(stem: str) -> int:
    """Porter's m: how many vowel-consonant sequences ``stem`` has ('y' after a consonant is a vowel)."""
    m, after_vowel = 0, False
    for i, c in enumerate(stem):
        vowel = c in _VOWELS or (c == "y" and i > 0 and not after_vowel)
        m += after_vowel and not vowel
        after_vowel = vowel
    return m


class LuceneAnalyzer:
    """Text -> terms as Lucene's English analyzer makes them. ``stopwords``: the words to drop
    (after lower-casing, before stemming), Lucene's English set by default; empty keeps all."""

    def __init__(self, stopwords: Iterable[str] = LUCENE_STOPWORDS) -> None:
        self.stopwords = frozenset(stopwords)
        self._porter = Stemmer.Stemmer("porter")
        self.stem = functools.lru_cache(maxsize=1 << 18)(self._stem)

    def _stem(self, word: str) -> str:
        if len(word) <= 2:
            return word
        stem = self._porter.stemWord(word)
        if stem.endswith("logi") and _measure(stem[:-4]) > 0:
            return stem[:-1]
        if stem.endswith("bli") and not stem.endswith("abli") and _measure(stem[:-3]) > 0:
            return self._porter.stemWord(stem[:-1] + "e")
        return stem

    def __call__(self, text: str) -> list[str]:
        return [term for term in map(self._term, self._words(_prepare(text))) if term]

    def _term(self, word: str) -> str:
        """The term of one word, or '' for a stopword."""
        if word[-2:] in ("'s", "\u2019s"):
            word = word[:-2]
        if not word or word in self.stopwords:
            return ""
        return self.stem(word)

    @staticmethod
    def _words(text: str) -> list[str]:
        if _IDEOGRAPH.search(text):
            text = _IDEOGRAPH.sub(r" \g<0> ", text)
        return _WORD.findall(text)

    def corpus_terms(self, texts: Iterable[str], vocab: dict[str, int]) -> Iterator[list[int]]:
        """The term ids of each text, adding new terms to ``vocab``; equal to ``self(text)`` mapped
        through ``vocab``, but several times faster on a large corpus: the text is split at
        characters that can neither be in a word nor join two, and each distinct piece is analysed
        once."""
        pieces: dict[str, tuple[int, ...]] = {}
        for text in texts:
            text = _prepare(text)
            if "\u202f" in text:  # str.split would break words there
                yield [vocab.setdefault(t, len(vocab)) for t in self(text)]
                continue
            split = text.split()
            try:
                yield list(chain.from_iterable(map(pieces.__getitem__, split)))
            except KeyError:
                for piece in split:
                    if piece not in pieces:
                        terms = (self._term(w) for w in self._words(piece))
                        pieces[piece] = tuple(vocab.setdefault(t, len(vocab)) for t in terms if t)
                yield list(chain.from_iterable(map(pieces.__getitem__, split)))


def _prepare(text: str) -> str:
    # Java lower-cases 'İ' to 'i', Python to 'i' + a combining dot. Breaks never touch a word nor
    # a joiner, so spaces in their place change no word.
    return text.replace("\u0130", "i").lower().translate(_BREAK_TABLE)
