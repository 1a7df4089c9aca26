"""Multi-hop questions over the world: k-1 relation edges from a named root, then one lookup.

"What currency is used in the country that contains the birthplace of Elira Quenton?" follows
birthplace -> country -> currency. Only the root is named; every relation is functional, so the
answer is unique. A chain that revisits an entity, asks a leaked fact, or whose answer already
appears in the question text is rejected.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from typing import Any

from searchgym.tasks.task import Task

from .entities import KINDS, RELATIONS, Entity, Relation
from .names import normalise
from .passages import passage_title
from .vocab import WORK_KINDS

SPLITS = ("train", "dev", "test")
_DRAW_ORDER = ("test", "dev", "train")  # so that asking for more train questions keeps test fixed
MAX_MISSES = 3000  # consecutive rejected draws after which a split is taken as exhausted

ROOTS = {
    "person": ("{n}",), "city": ("{n}", "the city of {n}"), "country": ("{n}",),
    "organisation": ("{n}", "the company {n}"), "university": ("{n}",),
    "work": ("{n}", "the {kind} {n}"),
}  # fmt: skip
# "the R of {d}" for every relation whose value is an entity.
NOUN_PHRASES = {
    "birthplace": ("the birthplace of {d}", "the city where {d} was born",
                   "the city in which {d} was born"),
    "spouse": ("the spouse of {d}", "the person who married {d}"),
    "employer": ("the employer of {d}", "the organisation that employed {d}",
                 "the company {d} worked for"),
    "alma_mater": ("the alma mater of {d}", "the university where {d} studied",
                   "the university {d} attended"),
    "country": ("the country that contains {d}", "the country in which {d} lies"),
    "mayor": ("the mayor of {d}", "the person who serves as mayor of {d}"),
    "capital": ("the capital of {d}", "the capital city of {d}"),
    "founder": ("the founder of {d}", "the person who founded {d}"),
    "headquarters": ("the headquarters city of {d}", "the city where {d} is headquartered"),
    "campus": ("the city that is home to {d}", "the city where {d} has its campus"),
    "president": ("the president of {d}", "the person who leads {d}"),
    "creator": ("the creator of {d}", "the person who created {d}"),
    "publisher": ("the publisher of {d}", "the company that {released} {d}"),
}  # fmt: skip
_FOUNDED = ("In what year was {d} founded?", "When was {d} founded?",
            "What is the founding year of {d}?")  # fmt: skip
QUESTIONS = {
    "birth_year": ("In what year was {d} born?", "When was {d} born?",
                   "What is the birth year of {d}?"),
    "birthplace": ("In which city was {d} born?", "Where was {d} born?",
                   "What is the birthplace of {d}?"),
    "spouse": ("Who was {d} married to?", "Who is the spouse of {d}?", "Whom did {d} marry?"),
    "occupation": ("What was the occupation of {d}?", "What did {d} do for a living?",
                   "What profession did {d} follow?"),
    "employer": ("Which organisation employed {d}?", "Who was the employer of {d}?",
                 "For which company did {d} work?"),
    "alma_mater": ("Which university did {d} attend?", "Where did {d} study?",
                   "What is the alma mater of {d}?"),
    "country": ("In which country is {d}?", "Which country contains {d}?",
                "{d} is located in which country?"),
    "founding_year": _FOUNDED,
    "mayor": ("Who is the mayor of {d}?", "Who serves as mayor of {d}?"),
    "population": ("What is the population of {d}?", "How many people live in {d}?"),
    "capital": ("What is the capital of {d}?", "Which city is the capital of {d}?"),
    "currency": ("What currency is used in {d}?", "What is the currency of {d}?"),
    "continent": ("On which continent is {d}?", "Which continent is {d} part of?"),
    "founder": ("Who founded {d}?", "Who is the founder of {d}?"),
    "headquarters": ("Where is {d} headquartered?", "Where are the headquarters of {d}?",
                     "In which city does {d} have its headquarters?"),
    "industry": ("In which industry does {d} operate?", "What is the industry of {d}?"),
    "campus": ("Where is {d} located?", "Which city is home to {d}?"),
    "president": ("Who is the president of {d}?", "Who leads {d}?"),
    "creator": ("Who {verb} {d}?", "Who is the creator of {d}?"),
    "publisher": ("Which company {released} {d}?", "Who is the publisher of {d}?"),
    "year": ("In what year was {d} first {released}?", "When was {d} {released}?"),
    "genre": ("What is the genre of {d}?", "To which genre does {d} belong?"),
}  # fmt: skip
_LOOPS = {("spouse", "spouse"), ("capital", "country")}  # always lead back where they started


def vocabulary() -> frozenset[str]:
    """Every lower-cased word the question templates use."""
    texts = [t for v in (*ROOTS.values(), *NOUN_PHRASES.values(), *QUESTIONS.values()) for t in v]
    return frozenset(w.lower() for t in texts for w in re.findall(r"[A-Za-z]+", t))


def schema_paths(hops: int) -> list[tuple[Relation, ...]]:
    """Every relation sequence a ``hops``-hop question can follow, in a fixed order."""
    paths: list[tuple[Relation, ...]] = [()]
    for step in range(hops):
        last_step = step == hops - 1
        paths = [
            (*p, r)
            for p in paths
            for r in RELATIONS.values()
            if (r.target or last_step)
            and (not p or (r.kind == p[-1].target and (p[-1].name, r.name) not in _LOOPS))
        ]
    return paths


def make_questions(
    entities: list[Entity],
    leaks: set[tuple[str, str]],
    seed: int,
    max_hops: int,
    counts: dict[str, int],
) -> dict[str, dict[int, list[Task]]]:
    """Questions per split and hop count; no chain and no question text is in two splits."""
    by_id = {e.id: e for e in entities}
    by_kind = {k: [e for e in entities if e.kind == k] for k in KINDS}
    out: dict[str, dict[int, list[Task]]] = {s: {} for s in SPLITS}
    for hops in range(1, max_hops + 1):
        rng = random.Random(f"searchgym-world/{seed}/questions/{hops}")
        paths = schema_paths(hops)
        seen: set[Any] = set()
        for split in _DRAW_ORDER:
            tasks: list[Task] = []
            misses = 0
            while len(tasks) < counts[split] and misses < MAX_MISSES:
                task = _draw(rng, rng.choice(paths), by_id, by_kind, leaks, seen)
                if task is None:
                    misses += 1
                    continue
                misses = 0
                question, answers, chain, answer_type = task
                tasks.append(Task(
                    id=f"fictional/{split}/{hops}hop/{len(tasks):06d}",
                    question=question,
                    answers=answers,
                    evidence=tuple(c["doc_id"] for c in chain),
                    metadata={"source": "fictional", "hops": hops, "answer_type": answer_type,
                              "chain": chain},
                ))  # fmt: skip
            out[split][hops] = tasks
    return out


def _draw(
    rng: random.Random,
    path: Sequence[Relation],
    by_id: dict[str, Entity],
    by_kind: dict[str, list[Entity]],
    leaks: set[tuple[str, str]],
    seen: set[Any],
) -> tuple[str, tuple[str, ...], list[dict[str, Any]], str] | None:
    """One question along ``path`` from a random root, or None if that draw is unusable."""
    root = rng.choice(by_kind[path[0].kind])
    if (root.id, tuple(r.name for r in path)) in seen:
        return None
    chain = follow(root, path, by_id)
    if chain is None or any((e.id, r.name) in leaks for e, r in zip(chain, path, strict=False)):
        return None
    if len({e.id for e in chain}) < len(chain):  # a chain that comes back to an entity
        return None
    answers = answers_of(path[-1], chain[-1])
    question = _phrase(rng, path, root)
    padded = f" {normalise(question)} "
    if question in seen or any(f" {normalise(a)} " in padded for a in answers):
        return None
    seen.update([(root.id, tuple(r.name for r in path)), question])
    return question, answers, chain_steps(chain, path), path[-1].answer_type


def follow(root: Entity, path: Sequence[Relation], by_id: dict[str, Entity]) -> list[Entity] | None:
    """The entities ``path`` visits from ``root``: the root, then each relation's entity (the
    last one is the subject of a literal answer, the answer of an entity one); None where an
    entity lacks the relation."""
    chain = [root]
    for r in path:
        here = chain[-1]
        if here.kind != r.kind or r.name not in here.facts:
            return None
        if r.target:
            chain.append(by_id[here.facts[r.name]])
    return chain


def chain_steps(chain: Sequence[Entity], path: Sequence[Relation]) -> list[dict[str, Any]]:
    """A task's ``chain`` metadata: per hop the entity, the relation, the passage that states it
    (its id and title) and a searcher's query for it."""
    steps = []
    for entity, r in zip(chain, path, strict=False):
        query = r.query.format(n=entity.name, **kind_words(entity))
        steps.append({"entity": entity.name, "relation": r.name, "doc_id": entity.passages[r.section],
                      "title": passage_title(entity.name, r.section), "query": query})  # fmt: skip
    return steps


def answers_of(final: Relation, last: Entity) -> tuple[str, ...]:
    """The canonical answer and its aliases; ``last`` is the answer entity or its subject."""
    if final.target:
        return (last.name, *last.aliases)
    value = last.facts[final.name]
    if final.answer_type == "number":
        return (f"{value:,}", str(value))
    if final.answer_type == "currency":
        return (value, value + "s")
    return (str(value),)


def kind_words(e: Entity) -> dict[str, str]:
    """The words a work's phrases use (its kind, "directed", "released"); none for other kinds."""
    if e.kind != "work":
        return {}
    words = WORK_KINDS[e.extra["kind"]]
    return {"kind": e.extra["kind"], "verb": words["verb"], "made": words["made"],
            "released": words["released"]}  # fmt: skip


def _phrase(rng: random.Random, path: Sequence[Relation], root: Entity) -> str:
    """The question text: the root's description wrapped by each edge, then the final ask."""
    words = kind_words(root)
    d = rng.choice(ROOTS[root.kind]).format(n=root.name, **words)
    dangling = False  # does ``d`` end in a verb ("the city where X was born")?
    for r in path[:-1]:
        options = [t for t in NOUN_PHRASES[r.name] if not dangling or t.endswith("{d}")]
        template = rng.choice(options)
        d = template.format(d=d, **words)
        dangling = dangling or not template.endswith("{d}")
    options = [t for t in QUESTIONS[path[-1].name] if not dangling or t.endswith("{d}?")]
    text = rng.choice(options).format(d=d, **words)
    return text[0].upper() + text[1:]
