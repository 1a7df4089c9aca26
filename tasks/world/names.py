"""Procedural fictional names: pronounceable, unique, and some deliberately alike.

Every name is built from syllables (or, for creative works, from a small English vocabulary mixed
with invented words), so no model has seen it. `NameBook` hands out names, refuses any whose
normalised form is already taken, and makes look-alikes of existing names on request: a one-letter
variant, a shared stem with another suffix, the same given name with a similar surname.
"""

from __future__ import annotations

import random
import re
import string

_ONSETS = (
    "b", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "c", "j",
    "br", "dr", "gr", "kr", "tr", "th", "st", "sh", "qu", "",
)  # fmt: skip
_VOWELS = ("a", "e", "i", "o", "u", "a", "e", "i", "o", "a", "e", "ae", "ei", "ia")
_CODAS = ("", "", "", "", "n", "r", "l", "s", "m")
_ENDINGS = {
    "given": ("a", "ia", "ira", "ena", "el", "en", "is", "o", "an", "eth", "ys", "ine", "or",
              "ric", "ella", "ian", "une", "mar"),
    "surname": ("ton", "well", "ard", "ick", "mere", "holt", "by", "den", "ley", "ross", "vane",
                "sell", "wick", "ford", "worth", "stan", "ring", "dell"),
    "city": ("holm", "mora", "vik", "gard", "ssa", "dale", "port", "wyn", "stad", "ent", "ora",
             "ith", "bury", "mouth", "ace", "vel", "anth", "oria"),
    "country": ("ia", "ara", "esh", "und", "ovia", "ania", "eth", "or", "avia", "enne", "ica",
                "ador"),
    "stem": ("anta", "ex", "ion", "ora", "ix", "elle", "ari", "um", "aro", "ent", "ova", "ico",
             "yne", "ast"),
    "word": ("el", "ot", "ar", "ine", "ek", "ou", "ash", "im", "ol", "ett"),
}  # fmt: skip

ORG_SUFFIXES = (
    "Labs", "Systems", "Holdings", "Industries", "Works", "Group", "Partners", "Company",
    "Corporation", "Collective", "Associates", "Trust", "Consolidated", "Enterprises",
)  # fmt: skip
UNIVERSITY_PATTERNS = (
    "{} University", "University of {}", "{} Institute of Technology", "{} College",
    "{} Polytechnic", "{} Academy of Sciences",
)  # fmt: skip
TITLE_ADJECTIVES = (
    "Silent", "Hollow", "Crimson", "Distant", "Quiet", "Broken", "Golden", "Paper", "Winter",
    "Amber", "Northern", "Salt", "Iron", "Glass", "Velvet", "Burning", "Lonely", "Secret",
    "Bitter", "Pale", "Wandering", "Sleeping", "Hidden", "Endless", "Scarlet", "Frozen", "Silver",
    "Narrow", "Drowned", "Patient",
)  # fmt: skip
TITLE_NOUNS = (
    "Meridian", "Orchard", "Lantern", "Harbour", "Tide", "Garden", "Archive", "Mirror", "Window",
    "Compass", "Signal", "Atlas", "Horizon", "Canal", "Lighthouse", "Ledger", "Orchestra", "Voyage",
    "Island", "Chapel", "Furnace", "Meadow", "Tower", "Engine", "Labyrinth", "Glacier", "Ferry",
    "Quarry", "Observatory", "Pendulum",
)  # fmt: skip
_TITLE_PATTERNS = (
    ("The {a} {n}", 3),
    ("{n} of {w}", 3),
    ("A {n} for {g}", 1),
    ("{w}", 2),
    ("Songs from {w}", 1),
    ("The {ns} of {w}", 2),
    ("{a} {w}", 2),
)


def plural(noun: str) -> str:
    """English plural of a title noun.

    >>> [plural(n) for n in ("Compass", "Ferry", "Tide")]
    ['Compasses', 'Ferries', 'Tides']
    """
    if noun.endswith(("s", "x", "ch", "sh")):
        return noun + "es"
    if noun.endswith("y") and noun[-2] not in "aeiou":
        return noun[:-1] + "ies"
    return noun + "s"


_SINGULAR = {plural(n): n for n in TITLE_NOUNS}
_AWKWARD = re.compile(r"(.)\1\1|uu|ii|[^aeiouy]{4}")  # triple letters, hard clusters
_PUNCT = re.compile(f"[{re.escape(string.punctuation)}]")
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalise(text: str) -> str:
    """SQuAD-style normal form used to decide whether two names could be confused.

    >>> normalise("The Silent  Meridian!")
    'silent meridian'
    """
    text = _ARTICLES.sub(" ", _PUNCT.sub(" ", text.lower()))
    return " ".join(text.split())


_SIMILAR = {
    "a": "eo", "e": "ai", "i": "ey", "o": "au", "u": "oi", "y": "i",
    "t": "d", "d": "t", "k": "g", "g": "k", "n": "m", "m": "n", "r": "l", "l": "r",
    "s": "z", "z": "s", "v": "f", "f": "v", "b": "p", "p": "b",
}  # fmt: skip


def one_letter_variant(word: str, rng: random.Random) -> str:
    """``word`` with one letter (never the first) replaced by a similar-sounding one."""
    spots = [i for i in range(1, len(word)) if word[i] in _SIMILAR]
    if not spots:
        return word
    i = rng.choice(spots)
    return word[:i] + rng.choice(_SIMILAR[word[i]]) + word[i + 1 :]


class NameBook:
    """Hands out unique fictional names; claimed names are never handed out twice."""

    def __init__(self, rng: random.Random, reserved: frozenset[str] = frozenset()) -> None:
        self._rng = rng
        self._reserved = reserved  # template vocabulary no invented word may collide with
        self._taken: set[str] = set()  # normalised names and aliases; only tested, never iterated
        self._words: set[str] = set()  # invented words already in use

    def claim(self, *names: str) -> bool:
        """Take ``names`` (a name and its aliases) if none is taken yet; report success."""
        keys = [normalise(n) for n in names]
        if len(set(keys)) != len(keys) or any(k in self._taken for k in keys):
            return False
        self._taken.update(keys)
        return True

    def word(self, ending: str, max_syllables: int = 2) -> str:
        """A fresh invented word (capitalised) whose last part comes from ``_ENDINGS[ending]``.

        Short words first: a second syllable is allowed only once short ones keep colliding.
        """
        rng = self._rng
        for attempt in range(10_000):
            n = 1 if attempt < 12 or rng.random() < 0.5 else rng.randint(2, max(2, max_syllables))
            body = "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS) for _ in range(n))
            end = rng.choice(_ENDINGS[ending])
            if end[0] in "aeiouy" and body[-1] in "aeiouy":
                body += rng.choice("nrlstmv")
            word = (body + end).capitalize()
            if self.fresh_word(word):
                return word
        raise RuntimeError(f"ran out of fresh {ending!r} words")  # pragma: no cover

    def fresh_word(self, word: str) -> bool:
        """Take ``word`` as an invented word if it is new, not reserved and not awkward."""
        key = word.lower()
        if key in self._words or key in self._reserved or len(key) < 4 or _AWKWARD.search(key):
            return False
        self._words.add(key)
        return True

    def variant(self, word: str) -> str | None:
        """A fresh one-letter variant of an invented word, or None after a few failed tries."""
        for _ in range(8):
            candidate = one_letter_variant(word, self._rng)
            if self.fresh_word(candidate):
                return candidate
        return None

    def title(self, given_names: list[str]) -> str:
        """A creative work's title such as "The Silent Meridian" or "Songs from Tarvessa"."""
        rng = self._rng
        patterns, weights = zip(*_TITLE_PATTERNS, strict=True)
        pattern = rng.choices(patterns, weights)[0]
        noun = rng.choice(TITLE_NOUNS)
        return pattern.format(
            a=rng.choice(TITLE_ADJECTIVES),
            n=noun,
            ns=plural(noun),
            w=self.word(rng.choice(("city", "stem", "country"))) if "{w}" in pattern else "",
            g=rng.choice(given_names),
        )

    def title_variant(self, title: str) -> str | None:
        """A look-alike of ``title``: one word swapped for a sibling or spelt one letter off."""
        rng = self._rng
        words = title.split()
        skip = ("The", "A", "of", "for", "from", "Songs")
        spots = [i for i, w in enumerate(words) if w not in skip]
        i = rng.choice(spots)
        word = _SINGULAR.get(words[i], words[i])
        is_plural = word != words[i]
        if word in TITLE_ADJECTIVES:
            new = rng.choice([a for a in TITLE_ADJECTIVES if a != word])
        elif word in TITLE_NOUNS:
            new = rng.choice([n for n in TITLE_NOUNS if n != word])
            new = plural(new) if is_plural else new
        else:
            new = self.variant(word)
            if new is None:
                return None
        return " ".join(words[:i] + [new] + words[i + 1 :])
