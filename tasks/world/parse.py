"""Read a question back into the world: the inverse of the generator's phrasing.

A question in the world's own phrasing ("Which country contains the birthplace of Elira
Quenton?") names a root entity, wraps it in relation phrases ("the birthplace of ...") and ends in
one ask ("Which country contains ...?"). `readings` finds every root and relation path the text can
be read as and follows each through the world's facts, with the generator's own code
(`questions.follow`, `chain_steps`, `answers_of`). So whoever wrote a question (the generator, a
scripted proposer, a policy in self-play), its answer and its evidence chain are known exactly.
Text outside the grammar has no reading.

>>> from searchgym.tasks.world import load_world
>>> world = load_world(seed=0, n_passages=300)
>>> task = world.tasks("dev", hops=2)[0]
>>> [(r.answers, r.evidence) == (task.answers, task.evidence) for r in readings(world, task.question)]
[True]
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

from .entities import RELATIONS, Entity, Relation
from .questions import NOUN_PHRASES, QUESTIONS, ROOTS, answers_of, chain_steps, follow, kind_words
from .vocab import WORK_KINDS


@dataclass(frozen=True)
class Reading:
    """One way to read a question: the root entity's id, the relations it follows, the answers
    that path gives in the world, and the chain as a task's metadata holds it (per hop: entity,
    relation, the passage that states it, a searcher's query)."""

    root: str
    path: tuple[str, ...]
    answers: tuple[str, ...]
    chain: tuple[dict[str, Any], ...]

    @property
    def evidence(self) -> tuple[str, ...]:
        """The passage of each hop, in order: a task's ``evidence``."""
        return tuple(step["doc_id"] for step in self.chain)


def readings(world: Any, question: str) -> list[Reading]:
    """Every reading of ``question`` (whitespace collapsed) in ``world``, a `World`, in a fixed
    order: none when the text is not in the world's phrasing or names no entity of it, several
    when it is ambiguous (two entities share a name)."""
    return _Grammar.of(world).question(" ".join(question.split()))


Described = tuple[Entity, tuple[Relation, ...]]
"""A description's reading: the root entity and the relations wrapped around it."""


class _Grammar:
    """The question grammar over one world's entities."""

    @staticmethod
    @functools.lru_cache(maxsize=8)
    def of(world: Any) -> _Grammar:
        return _Grammar(world.entities)

    def __init__(self, table: Any) -> None:
        self.by_id = {row["id"]: Entity.from_dict(row) for row in table}
        self.by_name: dict[str, list[Entity]] = {}
        for entity in self.by_id.values():
            self.by_name.setdefault(entity.name, []).append(entity)
        self.asks = [(r, _pattern(t, "d")) for r in RELATIONS.values() for t in QUESTIONS[r.name]]
        self.wraps = [
            (r, _pattern(t, "d")) for r in RELATIONS.values() if r.target for t in NOUN_PHRASES[r.name]
        ]
        self.roots = [(kind, _pattern(t, "n")) for kind, templates in ROOTS.items() for t in templates]
        self.description = functools.lru_cache(maxsize=4096)(self._description)

    def question(self, text: str) -> list[Reading]:
        out: list[Reading] = []
        for final, pattern in self.asks:
            for match in _matches(pattern, text):
                for root, path in self.description(match["d"]):
                    reading = self._reading(root, (*path, final), match)
                    if reading is not None and reading not in out:
                        out.append(reading)
        return out

    def _description(self, text: str) -> tuple[Described, ...]:
        """Every (root, relations) that the noun phrase ``text`` can describe."""
        out: list[Described] = []
        for kind, pattern in self.roots:
            for match in _matches(pattern, text):
                out += [
                    (e, ()) for e in self.by_name.get(match["n"], ()) if e.kind == kind and _fits(match, e)
                ]
        for relation, pattern in self.wraps:
            for match in _matches(pattern, text):
                inner = self.description(match["d"])
                out += [(root, (*path, relation)) for root, path in inner if _fits(match, root)]
        return tuple(out)

    def _reading(self, root: Entity, path: tuple[Relation, ...], match: re.Match[str]) -> Reading | None:
        """The reading of ``path`` from ``root``, if the world has every fact on it and the
        ask's words (a work's "directed", "released") are the root's own."""
        chain = follow(root, path, self.by_id)
        if chain is None or not _fits(match, root):
            return None
        answers = answers_of(path[-1], chain[-1])
        steps = chain_steps(chain, path)
        return Reading(root.id, tuple(r.name for r in path), answers, tuple(steps))


_WORK_WORDS = {"kind": tuple(WORK_KINDS)} | {
    word: tuple(dict.fromkeys(v[word] for v in WORK_KINDS.values())) for word in ("verb", "made", "released")
}


def _pattern(template: str, hole: str) -> re.Pattern[str]:
    """``template`` as a regular expression: ``{hole}`` any text; a work's words (``{verb}``,
    ``{released}``, ``{kind}``) any of theirs, captured to be checked against the root."""
    parts = re.split(r"\{(\w+)\}", template)
    regex = ""
    for i, part in enumerate(parts):
        if i % 2 == 0:
            regex += re.escape(part)
        elif part == hole:
            regex += f"(?P<{hole}>.+)"
        else:
            regex += f"(?P<{part}>" + "|".join(map(re.escape, _WORK_WORDS[part])) + ")"
    return re.compile(regex)


def _matches(pattern: re.Pattern[str], text: str) -> list[re.Match[str]]:
    """Whole matches of ``text`` with its first letter in either case (the generator capitalises
    a question's first letter)."""
    cases = (text, text[:1].lower() + text[1:], text[:1].upper() + text[1:])
    found = (pattern.fullmatch(t) for t in dict.fromkeys(cases))
    return [m for m in found if m is not None]


def _fits(match: re.Match[str], root: Entity) -> bool:
    """The work words ``match`` captured ("the film X", "Who directed X?") are ``root``'s own (the
    generator words every phrase of a question with its root's)."""
    words = {k: v for k, v in match.groupdict().items() if k in _WORK_WORDS and v is not None}
    return not words or words.items() <= kind_words(root).items()
