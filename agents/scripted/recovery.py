"""An oracle that takes a wrong turn and recovers: warm-start episodes that teach a policy to notice
a search that missed and to search again (the error recovery of Behavior Priming, arXiv 2510.06534),
made exactly from the generated world's gold chains.

A policy warm-started on the plain oracle's right chains never sees a search go wrong, so after
GRPO it still cannot recover from one; the errors of the main job's warm starts are such wrong
turns (docs/results.md#the-main-job): the second hop searched for another entity than the chain's,
or a hop searched with another relation's words.
"""

from __future__ import annotations

from typing import Any

from searchgym.agents.scripted.baselines import OracleAgent
from searchgym.tasks.extractive import parse_docs
from searchgym.tasks.world.entities import RELATIONS


class RecoveringOracleAgent(OracleAgent):
    """`OracleAgent` that, in a ``p_detour`` share of episodes (drawn from ``seed``), searches one
    hop of the gold chain wrongly first, then says that the results miss what it needs and searches
    the hop's right query. The wrong search is one of the two a small policy makes: another entity
    than the chain's, named in the previous hop's results (from the second hop on), or the right
    entity with another relation's query words (where that relation's facts stand in another
    passage of the entity, so the search misses them). Where a hop has neither, or the wrong
    search happens to show the right entity, the episode goes on as the oracle's.

    ``untrained`` is True right after the wrong search is written: a warm start leaves that
    action out of the loss (`searchgym.agents.train.warm_start`), so the policy learns the
    recovery, not the mistake."""

    def __init__(self, p_detour: float = 0.5, seed: int = 0) -> None:
        super().__init__(seed=seed)
        self.p_detour = p_detour

    def reset(self, info: dict[str, Any]) -> None:
        super().reset(info)
        self.chain = [hop for hop in self.task.metadata.get("chain") or [] if hop.get("query")]
        self.hop_kinds = _hop_kinds(self.chain)
        self.detour_at = None
        if self.chain and self.web is None and self.rng.random() < self.p_detour:
            self.detour_at = int(self.rng.integers(len(self.chain)))
        self.detour: tuple[str, str] | None = None  # the wrong query, once searched, and what it misses
        self.untrained = False
        self.previous = ""

    def act(self, observation: str) -> str:
        self.untrained = False
        if self.detour is not None:  # the turn after the wrong search
            k, missed = self.detour_at, self.detour[1]
            hop, self.detour = self.chain[k], None  # type: ignore[index]
            if _gold_title(hop, self.hop_kinds[k]) in {title for title, _ in parse_docs(observation)}:
                self.queries.pop(self.turn)  # it showed the hop's passage after all: go on
            else:
                self.turn += 1
                return self._say(
                    f"These results {missed}. Step {self.turn}: I need to find out about {hop['query']}.",
                    "search",
                    hop["query"],
                )
        if self.web is None and self.turn == self.detour_at:
            self.detour = self._wrong_query(self.turn, observation)
            if self.detour is not None:  # searched next, as the parent's step of this turn
                self.queries.insert(self.turn, self.detour[0])
                self.untrained = True
        return super().act(observation)

    def _wrong_query(self, k: int, observation: str) -> tuple[str, str] | None:
        """A query for hop ``k`` that may miss its passage, and what its results would then miss:
        another entity of the previous results, else another relation of the hop's entity whose
        facts stand in another of its passages."""
        hop = self.chain[k]
        entity = hop["entity"]
        if k > 0 and entity in hop["query"]:
            others = [t for t, _ in parse_docs(observation) if entity not in t]
            if others:
                name = others[0].split(" (")[0]  # "Name (career)": a person's section
                return hop["query"].replace(entity, name), f"are about {name}, not {entity}"
        kind = self.hop_kinds[k]
        right = RELATIONS.get((kind, hop["relation"])) if kind else None
        if right is None:
            return None
        wrong = [
            r.query.format(n=entity)
            for (of, _), r in RELATIONS.items()
            if of == kind and r.section != right.section and r.query.count("{") == 1
        ]
        if not wrong:
            return None
        fact = hop["relation"].replace("_", " ")
        return wrong[int(self.rng.integers(len(wrong)))], f"do not give the {fact} of {entity}"


def _gold_title(hop: dict[str, Any], kind: str | None) -> str:
    """The title of the passage that answers ``hop``: the entity's name, and a person's section.

    >>> _gold_title({"entity": "Ada Quell", "relation": "employer"}, "person")
    'Ada Quell (career)'
    """
    relation = RELATIONS.get((kind, hop["relation"])) if kind else None
    return f"{hop['entity']} ({relation.section})" if relation and relation.section else hop["entity"]


def _hop_kinds(chain: list[dict[str, Any]]) -> list[str | None]:
    """The entity kind each hop asks about: the first hop's from its relation where one kind has
    it, each later one the kind the previous relation points to.

    >>> _hop_kinds([{"relation": "birthplace"}, {"relation": "mayor"}])
    ['person', 'city']
    """
    kinds: list[str | None] = []
    for hop in chain:
        if not kinds:
            named = {kind for kind, name in RELATIONS if name == hop["relation"]}
            kinds.append(named.pop() if len(named) == 1 else None)
        else:
            previous = RELATIONS.get((kinds[-1], chain[len(kinds) - 1]["relation"])) if kinds[-1] else None
            kinds.append(previous.target if previous else None)
    return kinds
