"""Entities of the generated world, their attributes and their functional relations.

Six kinds: person, city, country, organisation, university, work. Every relation is functional
(one value per subject) and is stated in exactly one passage of its subject, the ``section`` named
here. Values are drawn at random, so nothing about them can be guessed from a name.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .names import ORG_SUFFIXES, UNIVERSITY_PATTERNS, NameBook
from .vocab import INDUSTRIES, MEETINGS, OCCUPATIONS, WORK_KINDS

KINDS = ("person", "city", "country", "organisation", "university", "work")
LOOKALIKE_RATE = 0.15  # share of entities named after an earlier one of the same kind


@dataclass(frozen=True)
class Relation:
    """A functional attribute of one entity kind: a literal value or another entity."""

    kind: str  # subject kind
    name: str
    target: str | None  # kind of the entity the value names; None for a literal
    answer_type: str
    section: str  # the subject's passage that states the fact ("" when it has one passage)
    query: str  # a searcher's query for the fact; {n} is the subject's name


_RELATIONS = (
    Relation("person", "birth_year", None, "year", "early life", "{n} born"),
    Relation("person", "birthplace", "city", "city", "early life", "{n} born"),
    Relation("person", "spouse", "person", "person", "early life", "{n} married"),
    Relation("person", "occupation", None, "occupation", "career", "{n} career"),
    Relation("person", "employer", "organisation", "organisation", "career", "{n} employer"),
    Relation("person", "alma_mater", "university", "university", "career", "{n} studied"),
    Relation("city", "country", "country", "country", "", "{n} country"),
    Relation("city", "founding_year", None, "year", "", "{n} founded"),
    Relation("city", "mayor", "person", "person", "", "{n} mayor"),
    Relation("city", "population", None, "number", "", "{n} population"),
    Relation("country", "capital", "city", "city", "", "{n} capital"),
    Relation("country", "currency", None, "currency", "", "{n} currency"),
    Relation("country", "continent", None, "continent", "", "{n} continent"),
    Relation("organisation", "founder", "person", "person", "", "{n} founder"),
    Relation("organisation", "headquarters", "city", "city", "", "{n} headquarters"),
    Relation("organisation", "founding_year", None, "year", "", "{n} founded"),
    Relation("organisation", "industry", None, "industry", "", "{n} industry"),
    Relation("university", "campus", "city", "city", "", "{n} campus"),
    Relation("university", "founding_year", None, "year", "", "{n} founded"),
    Relation("university", "president", "person", "person", "", "{n} president"),
    Relation("work", "creator", "person", "person", "", "{n} {made} by"),
    Relation("work", "publisher", "organisation", "organisation", "", "{n} {released} by"),
    Relation("work", "year", None, "year", "", "{n} {released} in"),
    Relation("work", "genre", None, "genre", "", "{n} genre"),
)
RELATIONS: dict[tuple[str, str], Relation] = {(r.kind, r.name): r for r in _RELATIONS}
SECTIONS = {k: (("early life", "career") if k == "person" else ("",)) for k in KINDS}


@dataclass
class Entity:
    """One entity while the world is built; ``facts`` holds literals or entity ids."""

    id: str
    kind: str
    name: str
    aliases: tuple[str, ...] = ()
    facts: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)  # never asked about: naming, flavour
    lookalikes: list[str] = field(default_factory=list)
    passages: dict[str, str] = field(default_factory=dict)  # section -> passage id

    def to_dict(self) -> dict[str, Any]:
        """The entity as the world's table holds it; a work also has its ``work_kind`` (novel,
        film, ...), which its questions' words depend on."""
        row = {
            "id": self.id, "kind": self.kind, "name": self.name, "aliases": list(self.aliases),
            "facts": self.facts, "lookalikes": self.lookalikes, "passages": self.passages,
        }  # fmt: skip
        return row | ({"work_kind": self.extra["kind"]} if self.kind == "work" else {})

    @classmethod
    def from_dict(cls, row: dict[str, Any]) -> Entity:
        """The entity of a row of the world's table (`to_dict`)."""
        extra = {"kind": row["work_kind"]} if row["kind"] == "work" else {}
        return cls(row["id"], row["kind"], row["name"], tuple(row["aliases"]), dict(row["facts"]), extra,
                   list(row["lookalikes"]), dict(row["passages"]))  # fmt: skip


def plan_counts(n_passages: int) -> dict[str, int]:
    """How many entities of each kind give ``n_passages`` passages (persons have two each)."""
    counts = {
        "country": max(6, round(n_passages * 0.004)),
        "city": max(18, round(n_passages * 0.04)),
        "university": max(6, round(n_passages * 0.02)),
        "organisation": max(16, round(n_passages * 0.08)),
        "work": max(16, round(n_passages * 0.12)),
    }
    rest = n_passages - sum(counts.values())
    counts["person"] = rest // 2
    counts["work"] += rest % 2
    return counts


def build_entities(seed: int, n_passages: int, book: NameBook) -> list[Entity]:
    """Every entity of the world with its facts, in a deterministic order."""
    rng = random.Random(f"searchgym-world/{seed}/entities")
    counts = plan_counts(n_passages)
    b = _Builder(rng, book)
    people = b.people(counts["person"])
    cities = b.named("city", counts["city"], b.word_name("city"), b.word_alike)
    countries = b.named("country", counts["country"], b.word_name("country"), b.word_alike)
    orgs = b.named("organisation", counts["organisation"], b.org_name, b.org_alike)
    unis = b.named("university", counts["university"], b.uni_name, b.uni_alike)
    given = sorted({p.extra["given"] for p in people})
    works = b.named("work", counts["work"], lambda: ((book.title(given),), {}), b.title_alike)

    continents = [book.word("country") for _ in range(6)]
    for country in countries:
        country.facts["continent"] = rng.choice(continents)
        country.facts["currency"] = book.word("word").lower()
    for i, city in enumerate(cities):
        country = countries[i] if i < len(countries) else rng.choice(countries)
        city.facts["country"] = country.id
        city.facts["founding_year"] = rng.randint(800, 1850)
        city.facts["population"] = int(round(10 ** rng.uniform(3.6, 6.6), -2))
    cities_in: dict[str, list[Entity]] = {}
    for city in cities:
        cities_in.setdefault(city.facts["country"], []).append(city)
    for country in countries:
        country.facts["capital"] = rng.choice(cities_in[country.id]).id

    for p in people:
        p.facts["birth_year"] = rng.randint(1820, 1995)
        p.facts["birthplace"] = rng.choice(cities).id
        p.facts["occupation"] = rng.choice(OCCUPATIONS)
    b.marry(people)
    for u in unis:
        u.facts["campus"] = rng.choice(cities).id
        u.facts["founding_year"] = rng.randint(1200, 1960)
    for o in orgs:
        founder = rng.choice(people)
        o.facts["founder"] = founder.id
        o.facts["founding_year"] = min(2022, founder.facts["birth_year"] + rng.randint(22, 55))
        o.facts["headquarters"] = rng.choice(cities).id
        o.facts["industry"] = rng.choice(INDUSTRIES)
    for p in people:
        born = p.facts["birth_year"]
        p.facts["employer"] = b.pick(orgs, lambda o, y=born: o.facts["founding_year"] <= y + 45)
        p.facts["alma_mater"] = b.pick(unis, lambda u, y=born: u.facts["founding_year"] <= y + 18)
    leaders = b.cycle([p for p in people if p.facts["birth_year"] >= 1940])
    for city in cities:
        city.facts["mayor"] = next(leaders).id
    for u in unis:
        u.facts["president"] = next(leaders).id
    born_in = {p.id: p.facts["birth_year"] for p in people}
    for w in works:
        kind = w.extra["kind"] = rng.choice(list(WORK_KINDS))
        w.facts["creator"] = b.pick(people, lambda p: p.facts["birth_year"] <= 1990)
        year = min(2023, born_in[w.facts["creator"]] + rng.randint(22, 70))
        w.facts["year"] = year
        w.facts["publisher"] = b.pick(orgs, lambda o, y=year: o.facts["founding_year"] <= y)
        w.facts["genre"] = rng.choice(WORK_KINDS[kind]["genres"])
    b.add_stem_aliases(orgs)
    return [*people, *cities, *countries, *orgs, *unis, *works]


Named = tuple[tuple[str, ...], dict[str, Any]]  # a name and its aliases; extra facts
Namer = Callable[[], Named]


class _Builder:
    """Naming and assignment helpers that share one random stream and one name book."""

    def __init__(self, rng: random.Random, book: NameBook) -> None:
        self.rng = rng
        self.book = book

    def named(self, kind: str, n: int, fresh: Namer, alike: Callable[[Entity], Named | None]) -> list[Entity]:
        """``n`` entities of ``kind``; some are named as look-alikes of an earlier one."""
        out: list[Entity] = []
        for i in range(n):
            base, made = None, None
            if out and self.rng.random() < LOOKALIKE_RATE:
                base = self.rng.choice(out)
                made = alike(base)
                if made is None or not self.book.claim(*made[0]):
                    base, made = None, None
            while made is None:
                made = fresh()
                if not self.book.claim(*made[0]):
                    made = None
            names, extra = made
            e = Entity(f"{kind}-{i:06d}", kind, names[0], tuple(names[1:]), extra=dict(extra))
            if base is not None:
                e.lookalikes.append(base.id)
                base.lookalikes.append(e.id)
            out.append(e)
        return out

    def people(self, n: int) -> list[Entity]:
        book, rng = self.book, self.rng
        given = [book.word("given") for _ in range(max(30, n // 6))]
        surnames = [book.word("surname") for _ in range(max(60, n // 2))]

        def fresh() -> Named:
            g, s = rng.choice(given), rng.choice(surnames)
            extra = {"given": g, "surname": s, "gender": rng.choice("fm")}
            if rng.random() < 0.15:
                return (f"{g} {rng.choice(given)} {s}", f"{g} {s}"), extra
            return (f"{g} {s}",), extra

        def alike(base: Entity) -> Named | None:
            g, s = base.extra["given"], base.extra["surname"]
            how = rng.randrange(3)
            if how == 0:
                s = book.variant(s)
            elif how == 1:
                g = book.variant(g)
            else:
                g = rng.choice(given)
            if g is None or s is None:
                return None
            return (f"{g} {s}",), {"given": g, "surname": s, "gender": rng.choice("fm")}

        return self.named("person", n, fresh, alike)

    def word_name(self, ending: str) -> Namer:
        return lambda: ((self.book.word(ending),), {})

    def word_alike(self, base: Entity) -> Named | None:
        word = self.book.variant(base.name)
        return None if word is None else ((word,), {})

    def org_name(self) -> Named:
        stem = self.book.word("stem")
        return (f"{stem} {self.rng.choice(ORG_SUFFIXES)}",), {"stem": stem}

    def org_alike(self, base: Entity) -> Named | None:
        stem, suffix = base.extra["stem"], base.name[len(base.extra["stem"]) + 1 :]
        if self.rng.random() < 0.6:
            suffix = self.rng.choice([s for s in ORG_SUFFIXES if s != suffix])
        else:
            stem = self.book.variant(stem)
        return None if stem is None else ((f"{stem} {suffix}",), {"stem": stem})

    def uni_name(self) -> Named:
        stem = self.book.word("stem")
        return (self.rng.choice(UNIVERSITY_PATTERNS).format(stem),), {"stem": stem}

    def uni_alike(self, base: Entity) -> Named | None:
        stem = base.extra["stem"]
        pattern = base.name.replace(stem, "{}")
        if self.rng.random() < 0.6:
            pattern = self.rng.choice([p for p in UNIVERSITY_PATTERNS if p != pattern])
        else:
            stem = self.book.variant(stem)
        return None if stem is None else ((pattern.format(stem),), {"stem": stem})

    def title_alike(self, base: Entity) -> Named | None:
        title = self.book.title_variant(base.name)
        return None if title is None else ((title,), {})

    def marry(self, people: list[Entity]) -> None:
        """Pair about half of the people with someone of a similar age; both tell the same story."""
        order = sorted(people, key=lambda p: (p.facts["birth_year"], self.rng.random()))
        i = 0
        while i + 1 < len(order):
            a, b = order[i], order[i + 1]
            if self.rng.random() < 0.55:
                a.facts["spouse"], b.facts["spouse"] = b.id, a.id
                year = min(2024, b.facts["birth_year"] + self.rng.randint(19, 35))
                a.extra["married"] = b.extra["married"] = year
                a.extra["children"] = b.extra["children"] = self.rng.randint(2, 5)
                a.extra["met"] = b.extra["met"] = self.rng.choice(MEETINGS)
                i += 2
            else:
                i += 1

    def pick(self, pool: list[Entity], ok: Callable[[Entity], bool]) -> str:
        """The id of a random member of ``pool``, preferring one for which ``ok`` holds."""
        for _ in range(6):
            e = self.rng.choice(pool)
            if ok(e):
                return e.id
        return e.id

    def cycle(self, pool: list[Entity]):
        """Draw distinct members of ``pool`` at random, reshuffling once it runs out."""
        while True:
            order = list(pool)
            self.rng.shuffle(order)
            yield from order

    def add_stem_aliases(self, orgs: list[Entity]) -> None:
        """Accept "Orvanta" for "Orvanta Labs" unless another organisation shares the stem."""
        stems: dict[str, int] = {}
        for o in orgs:
            stems[o.extra["stem"]] = stems.get(o.extra["stem"], 0) + 1
        for o in orgs:
            stem = o.extra["stem"]
            if stems[stem] == 1 and self.book.claim(stem):
                o.aliases = (*o.aliases, stem)
