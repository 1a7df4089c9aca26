"""Render entities as short encyclopedia passages and record which facts appear elsewhere.

Each passage states its subject's facts for that section, adds colour, sometimes mentions another
entity with one of its facts (a distractor) and, for entities with look-alike names, a "not to be
confused with" line. A fact of entity X stated outside X's own passage is *leaked*; questions
never ask a leaked fact, so every asked fact is stated exactly where its evidence points. (Two
facts are implied elsewhere by their nature: a marriage is told in both spouses' passages, and a
country's passage naming its capital implies that city's country.)
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from functools import cache
from string import Formatter
from typing import Any

from .entities import KINDS, SECTIONS, Entity
from .names import ORG_SUFFIXES, TITLE_ADJECTIVES, TITLE_NOUNS, UNIVERSITY_PATTERNS, NameBook
from .templates import HATNOTE_DESCRIPTIONS, HATNOTES
from .templates import SECTIONS as TEMPLATES
from .vocab import FLAVOUR_VALUES, INDUSTRIES, MEETINGS, OCCUPATIONS, WORK_KINDS

MIN_WORDS, MAX_WORDS = 40, 120
DISTRACTOR_RATE = 0.5


@dataclass(frozen=True)
class Draft:
    """A passage before it gets its id."""

    entity_id: str
    section: str
    title: str
    text: str


def vocabulary() -> frozenset[str]:
    """Every lower-cased word the templates use; invented names must avoid them."""
    chunks: list[str] = [*OCCUPATIONS, *INDUSTRIES, *WORK_KINDS, *ORG_SUFFIXES, *TITLE_NOUNS]
    chunks += [
        *TITLE_ADJECTIVES,
        *UNIVERSITY_PATTERNS,
        *(g for v in WORK_KINDS.values() for g in v["genres"]),
    ]
    chunks += [*MEETINGS, *(w for v in FLAVOUR_VALUES.values() for w in v)]
    for t in TEMPLATES.values():
        chunks += [s for _, s in t.openings] + [s for v in t.facts.values() for s in v]
        chunks += [*t.flavour, *(s for _, _, s in t.distractors)]
    chunks += [*HATNOTES, *(s for v in HATNOTE_DESCRIPTIONS.values() for _, s in v)]
    return frozenset(w.lower() for c in chunks for w in re.findall(r"[A-Za-z]+", c))


def render_passages(
    entities: list[Entity], book: NameBook, seed: int
) -> tuple[list[Draft], set[tuple[str, str]]]:
    """All passages in entity order, and the (entity id, fact) pairs stated outside their own."""
    renderer = _Renderer(entities, book, random.Random(f"searchgym-world/{seed}/passages"))
    drafts = [renderer.section(e, section) for e in entities for section in SECTIONS[e.kind]]
    return drafts, renderer.leaks


@cache
def _fields(template: str) -> tuple[str, ...]:
    return tuple(f for _, f, _, _ in Formatter().parse(template) if f)


def _a(word: str) -> str:
    return ("an " if word[0] in "aeiou" else "a ") + word


class _Context(dict):
    """A passage's template fields; colour fields are drawn the first time they are asked for."""

    def __init__(self, fields: dict[str, Any], draw) -> None:
        super().__init__(fields)
        self._draw = draw

    def __missing__(self, key: str) -> Any:
        value = self[key] = self._draw(key)
        return value


_RANGES = {
    "day": (1, 28),
    "kids": (3, 7),
    "decades": (2, 5),
    "span": (5, 35),
    "effort": (2, 9),
    "provinces": (4, 30),
    "n_offices": (2, 40),
    "n_languages": (2, 30),
}
_COUNTS = {"staff": (40, 90_000), "students": (800, 60_000), "volumes": (20_000, 4_000_000)}
_PARENTS = ("parent_occ", "a_parent_occ", "a_parent_occ2")
_POOLS = ("elsewhere", "river", "language", "prize")
# Colour fields any passage can draw; the rest come with the entity and may be absent.
_ALWAYS = frozenset([*FLAVOUR_VALUES, *_RANGES, *_COUNTS, *_PARENTS, *_POOLS])


@cache
def _needs(template: str) -> tuple[str, ...]:
    return tuple(f for f in _fields(template) if f not in _ALWAYS)


@cache
def _usable(templates: tuple[str, ...], fields: frozenset[str]) -> tuple[str, ...]:
    """The ``templates`` whose fields are all in ``fields`` or drawn at will."""
    return tuple(t for t in templates if all(f in fields for f in _needs(t)))


class _Renderer:
    def __init__(self, entities: list[Entity], book: NameBook, rng: random.Random) -> None:
        self.rng = rng
        self.by_id = {e.id: e for e in entities}
        self.by_kind = {k: [e for e in entities if e.kind == k] for k in KINDS}
        self.leaks: set[tuple[str, str]] = set()
        self._facts: dict[str, dict[str, Any]] = {}
        n_cities, n_countries = len(self.by_kind["city"]), len(self.by_kind["country"])
        self._pools = {
            "elsewhere": [c.name for c in self.by_kind["city"]],
            "river": [book.word("word") for _ in range(max(20, n_cities // 2))],
            "language": [book.word("word") for _ in range(max(6, n_countries // 2))],
            "prize": [book.word("stem") for _ in range(40)],
        }

    def section(self, e: Entity, section: str) -> Draft:
        rng, tpl = self.rng, TEMPLATES[(e.kind, section)]
        ctx = _Context({**self.fact_fields(e), **self.own_colour(e)}, self.colour)
        have = frozenset(ctx)
        facts = [f for f in tpl.facts if f in e.facts]
        usable = _usable(tuple(t for _, t in tpl.openings), have)
        openings = [(c, t) for c, t in tpl.openings if t in usable and all(f in facts for f in c)]
        covered, opening = rng.choice(openings)
        body: list[tuple[str, dict[str, Any]]] = [
            (rng.choice(_usable(tpl.facts[f], have)), {}) for f in facts if f not in covered
        ]
        if section == "early life" and "spouse" not in e.facts:
            body.append(("{S} never married.", {}))
        colour = list(_usable(tpl.flavour, have))
        rng.shuffle(colour)
        n_colour = rng.randint(2, 3)
        body += [(t, {}) for t in colour[:n_colour]]
        rng.shuffle(body)
        if tpl.distractors and rng.random() < DISTRACTOR_RATE:
            distractor = self.distractor(e, tpl.distractors)
            if distractor is not None:
                body.insert(rng.randint(0, len(body)), distractor)
        named = [i for i, (t, _) in enumerate(body) if "{S}" in t or "{s}" in t]
        if not named:  # name the subject twice: append a colour sentence that can carry it
            body.append((rng.choice([t for t in colour if "{S}" in t or "{s}" in t]), {}))
            named = [len(body) - 1]
        i = rng.choice(named)
        body[i] = (body[i][0], {**body[i][1], "S": e.name, "s": e.name})
        hatnotes = self.hatnotes(e) if section == SECTIONS[e.kind][0] else []
        sentences = [_fill(opening, ctx)] + [_fill(t, ctx, x) for t, x in body]
        spare = colour[n_colour:]
        n_words = sum(len(s.split()) for s in sentences + hatnotes)
        while n_words < MIN_WORDS and spare:
            sentences.append(_fill(spare.pop(), ctx))
            n_words += len(sentences[-1].split())
        while n_words > MAX_WORDS and hatnotes:
            n_words -= len(hatnotes.pop().split())
        sentences = [s[0].upper() + s[1:] for s in sentences]
        at_top = hatnotes and rng.random() < 0.3
        text = " ".join(hatnotes + sentences if at_top else sentences + hatnotes)
        title = passage_title(e.name, section)
        return Draft(e.id, section, title, text)

    def distractor(
        self, e: Entity, options: tuple[tuple[str | None, str, str], ...]
    ) -> tuple[str, dict[str, Any]] | None:
        """A sentence naming another entity, maybe with one of its facts (which then leaks)."""
        fact, kind, template = self.rng.choice(options)
        for _ in range(10):
            other = self.rng.choice(self.by_kind[kind])
            if other.id != e.id and other.id not in e.lookalikes:
                if fact is not None:
                    self.leaks.add((other.id, fact))
                return template, self.other_fields(other)
        return None

    def hatnotes(self, e: Entity) -> list[str]:
        """ "Not to be confused with ..." lines for up to two look-alikes of ``e``."""
        lines = []
        for other_id in e.lookalikes[:2]:
            other = self.by_id[other_id]
            fact, description = self.rng.choice(HATNOTE_DESCRIPTIONS[other.kind])
            extra = self.other_fields(other)
            extra["X_description"] = description.format_map(extra)
            if fact is not None:
                self.leaks.add((other.id, fact))
            lines.append(_fill(self.rng.choice(HATNOTES), {"N": e.name}, extra))
        return lines

    def other_fields(self, other: Entity) -> dict[str, Any]:
        return {"X": other.name, **{f"X_{k}": v for k, v in self.fact_fields(other).items()}}

    def fact_fields(self, e: Entity) -> dict[str, Any]:
        """Template fields that state ``e``'s facts, plus its name and pronouns."""
        if e.id in self._facts:
            return self._facts[e.id]
        f, name = e.facts, lambda key: self.by_id[f[key]].name
        out: dict[str, Any] = {"N": e.name}
        if e.kind == "person":
            she = e.extra["gender"] == "f"
            out.update(S="She" if she else "He", s="she" if she else "he",
                       P="Her" if she else "His", p="her" if she else "his",
                       O="her" if she else "him")  # fmt: skip
            out.update(
                year=f["birth_year"],
                city=name("birthplace"),
                occ=f["occupation"],
                a_occ=_a(f["occupation"]),
                org=name("employer"),
                uni=name("alma_mater"),
            )
            if "spouse" in f:
                out.update(spouse=name("spouse"), **{k: e.extra[k] for k in ("married", "children", "met")})
        else:
            out.update(S="It", s="it", P="Its", p="its", O="it")
        if e.kind == "city":
            out.update(
                country=name("country"),
                fy=f["founding_year"],
                mayor=name("mayor"),
                pop=f"{f['population']:,}",
            )
        elif e.kind == "country":
            out.update(capital=name("capital"), currency=f["currency"], continent=f["continent"])
        elif e.kind == "organisation":
            out.update(
                founder=name("founder"),
                fy=f["founding_year"],
                hq=name("headquarters"),
                ind=f["industry"],
                a_ind=_a(f["industry"]),
            )
        elif e.kind == "university":
            out.update(campus=name("campus"), fy=f["founding_year"], president=name("president"))
        elif e.kind == "work":
            kind = e.extra["kind"]
            out.update(
                creator=name("creator"),
                publisher=name("publisher"),
                year=f["year"],
                genre=f["genre"],
                a_genre=_a(f["genre"]),
                kind=kind,
                made=WORK_KINDS[kind]["made"],
                released=WORK_KINDS[kind]["released"],
            )
        self._facts[e.id] = out
        return out

    def colour(self, key: str) -> Any:
        """A random value for the colour field ``key`` (one of `_ALWAYS`)."""
        rng = self.rng
        if key in FLAVOUR_VALUES:
            return rng.choice(FLAVOUR_VALUES[key])
        if key in _RANGES:
            return rng.randint(*_RANGES[key])
        if key in _COUNTS:
            return f"{rng.randint(*_COUNTS[key]):,}"
        if key in _PARENTS:
            occ = rng.choice(OCCUPATIONS)
            return occ if key == "parent_occ" else _a(occ)
        return rng.choice(self._pools[key])

    def own_colour(self, e: Entity) -> dict[str, Any]:
        """Colour fields that depend on ``e``: dates in a life (none after 2024), a work's length."""
        rng, out = self.rng, {}
        if e.kind == "person":
            born = e.facts["birth_year"]
            joined = born + rng.randint(20, 30)
            dates = {"joined": joined, "left": joined + rng.randint(5, 30),
                     "graduated": born + rng.randint(21, 25), "retired": born + rng.randint(55, 70),
                     "prized": born + rng.randint(30, 60)}  # fmt: skip
            out = {k: v for k, v in dates.items() if v <= 2024}
        elif e.kind == "work":
            kind = e.extra["kind"]
            if kind == "album":
                out["length"] = f"It contains {rng.randint(6, 16)} tracks."
            elif kind == "film":
                out["length"] = f"It runs for {rng.randint(75, 190)} minutes."
            else:
                out["length"] = f"It runs to {rng.randint(48, 720)} pages."
        return out


def _fill(template: str, ctx: dict[str, Any], extra: dict[str, Any] | None = None) -> str | None:
    """``template`` filled from ``extra`` then ``ctx``, or None when a field is unavailable."""
    values = {}
    for field in _fields(template):
        try:
            values[field] = extra[field] if extra and field in extra else ctx[field]
        except KeyError:
            return None
    return template.format_map(values)


def passage_title(name: str, section: str) -> str:
    """The title of an entity's passage: its name, and the section where it has several.

    >>> passage_title("Merian Jevane", "early life"), passage_title("Dreisent", "")
    ('Merian Jevane (early life)', 'Dreisent')
    """
    return f"{name} ({section})" if section else name
