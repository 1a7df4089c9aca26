"""Why an episode failed, and what its searches showed: one failure kind per failed episode (EM 0),
read from what the episode did against the gold evidence its task names, and the retrieval card
of a set of episodes (`failure_card`, `card`).

The kinds, decided in this order:

- ``program_error``: an agent program's episode ended with an error (`Episode.error`);
- ``turn_limit``: it never answered, every action well formed: it ran out of turns;
- ``protocol``: it never answered, and wrote an invalid action;
- ``reading_miss``: it answered wrongly with every gold passage shown;
- where a gold passage was never shown, and the task has a chain (the generated world: each hop's
  entity, relation, passage and the oracle's query), the first hop whose passage never showed:
  ``early_answer`` where the episode made fewer searches than that hop's number (it answered
  before it could have searched the hop), ``wrong_entity`` where no search named the hop's entity
  (for a later hop: the bridge entity was misread), ``wrong_relation`` where a search named the
  entity but none with the relation's words, else ``retrieval_miss`` (the right words, and the
  retriever did not show the passage);
- ``retrieval_miss``, where the task names its evidence but no chain;
- ``unknown``: it answered wrongly, and the task names no evidence to tell which.

Words are compared as Lucene's English analyzer makes terms (lower case, no stopwords, Porter
stems): a search names an entity when it holds at least half of the entity's terms, and names a
relation when it holds one of the terms the oracle's query adds to the entity.

>>> from searchgym.agents.play.episode import Episode, Turn
>>> chain = [{"entity": "Gremis Deilwell", "doc_id": "d1", "query": "Gremis Deilwell studied"},
...          {"entity": "Asora Institute", "doc_id": "d2", "query": "Asora Institute founded"}]
>>> def episode(*searches, answer="1482"):
...     turns = [Turn("", "", 0.0, "search", None, query=q, doc_ids=ids) for q, ids in searches]
...     turns.append(Turn("", "", 0.0, "answer", None))
...     return Episode("t", "q", ["1482"], {"chain": chain}, turns, prediction=answer,
...                    em=float(answer == "1482"), evidence=["d1", "d2"])
>>> first = ("Gremis Deilwell studied", ["d1"])
>>> failure_kind(episode(first, ("Asora Institute founded", ["d2"])))
>>> failure_kind(episode(first, ("Asora Institute founded", ["d2"]), answer="1500"))
'reading_miss'
>>> failure_kind(episode(first, ("Orvan College founded", ["d7"]), answer="1500"))
'wrong_entity'
>>> failure_kind(episode(first, ("Asora Institute location", ["d9"]), answer="1500"))
'wrong_relation'
>>> failure_kind(episode(first, answer="1500"))  # one search for two hops
'early_answer'
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Sequence
from statistics import fmean
from typing import Any

from searchgym.agents.play.episode import Episode
from searchgym.failure_kinds import KINDS
from searchgym.retrievers.analysis import LuceneAnalyzer
from searchgym.stats import bootstrap_ci


def failure_kind(episode: Episode) -> str | None:
    """Why ``episode`` failed (one of `KINDS`), or None where it answered right (EM 1)."""
    if episode.em >= 1.0:
        return None
    if episode.error is not None:
        return "program_error"
    if episode.prediction is None:
        return "protocol" if episode.n_invalid else "turn_limit"
    if not episode.evidence:
        return "unknown"
    shown = shown_at(episode)
    if all(shown[doc_id] is not None for doc_id in episode.evidence):
        return "reading_miss"
    chain = episode.metadata.get("chain") or []
    number, missed = next(
        ((k, hop) for k, hop in enumerate(chain, 1) if shown.get(hop.get("doc_id")) is None), (0, None)
    )
    if missed is None or not {"entity", "query"} <= set(missed):
        return "retrieval_miss"
    if sum(turn.tool == "search" for turn in episode.turns) < number:
        return "early_answer"
    queries = [_terms(turn.query) for turn in episode.turns if turn.query]
    entity = _terms(missed["entity"])
    naming = [q for q in queries if len(entity & q) * 2 >= len(entity)]
    if not naming:
        return "wrong_entity"
    relation = _terms(missed["query"]) - entity
    if relation and not any(relation & q for q in naming):
        return "wrong_relation"
    return "retrieval_miss"


def shown_at(episode: Episode) -> dict[str, int | None]:
    """For each gold evidence passage of the episode's task, the turn (from 0) whose search first
    showed it, or None where none did."""
    first: dict[str, int] = {}
    for t, turn in enumerate(episode.turns):
        for doc_id in turn.doc_ids or ():
            first.setdefault(doc_id, t)
    return {doc_id: first.get(doc_id) for doc_id in episode.evidence}


def failure_card(episodes: Sequence[Episode], seed: int = 0) -> dict[str, Any]:
    """The retrieval card of ``episodes`` (`card`)."""
    return card([failure_kind(ep) for ep in episodes], [shown_at(ep) for ep in episodes if ep.evidence], seed)


def card(
    kinds: Sequence[str | None], shown: Sequence[dict[str, int | None]], seed: int = 0
) -> dict[str, Any]:
    """The retrieval card of a set of episodes, from each one's `failure_kind` and, for those whose
    task names its evidence, `shown_at`: ``n``, ``failed`` (EM 0), per kind of `KINDS` its
    ``count`` with the 95 % bootstrap interval of the count over the episodes (``low``,
    ``high``), and over the episodes with evidence (``with_evidence``) the share of gold
    passages their searches showed (``gold_shown``), the share of episodes shown every one
    (``all_gold_shown``) and the mean turn of the first gold passage shown (``first_gold_turn``,
    from 0). The counts add up to ``failed``; a share of no episodes is None."""
    n, counts = len(kinds), Counter(kind for kind in kinds if kind is not None)
    by_kind = {}
    for kind in (k for k in KINDS if counts[k]):
        low, high = bootstrap_ci([float(k == kind) for k in kinds], seed=seed)
        by_kind[kind] = {"count": counts[kind], "low": round(low * n), "high": round(high * n)}
    turns = [t for one in shown for t in one.values()]
    firsts = [min(ts) for one in shown if (ts := [t for t in one.values() if t is not None])]
    return {
        "n": n,
        "failed": sum(counts.values()),
        "kinds": by_kind,
        "with_evidence": len(shown),
        "gold_shown": sum(t is not None for t in turns) / len(turns) if turns else None,
        "all_gold_shown": fmean(all(t is not None for t in one.values()) for one in shown) if shown else None,
        "first_gold_turn": fmean(firsts) if firsts else None,
    }


def against_oracle(episodes: Sequence[Episode], oracle: Sequence[Episode]) -> dict[str, float | None]:
    """The gold passages the agent's searches showed against those the oracle's queries showed
    on the same tasks and retriever (``oracle[i]`` played ``episodes[i]``'s task):
    ``oracle_gold_shown`` and ``recall_vs_oracle``, the agent's share over the oracle's (None
    where the oracle was shown none)."""

    def shown(eps: Sequence[Episode]) -> list[bool]:
        return [t is not None for ep in eps for t in shown_at(ep).values()]

    mine, its = shown(episodes), shown(oracle)
    found = sum(its) / len(its) if its else None
    return {
        "oracle_gold_shown": found,
        "recall_vs_oracle": (sum(mine) / len(mine)) / found if mine and found else None,
    }


def decisions(open_book: Sequence[Episode], closed_book: Sequence[Episode]) -> dict[str, Any]:
    """AdaSearch's decision metric (arXiv 2512.16883): an episode decided it knew the answer when
    it answered without searching (``open_book[i]``), and it knew when its closed-book answer to
    the same task (``closed_book[i]``) was right. Returns the counts (``knew``, ``no_search``,
    ``no_search_right``, ``searched_though_knew``) and the precision, recall and F1 of "did not
    search" against "knew" (``f1_aware``; None where there is nothing to divide by: on the
    generated world, whose facts no model knows, ``knew`` is 0 and only the counts say anything)."""
    pairs = [
        (ep.n_searches == 0, closed.em >= 1.0, ep.em >= 1.0) for ep, closed in zip(open_book, closed_book)
    ]
    decided = sum(d for d, _, _ in pairs)
    knew = sum(k for _, k, _ in pairs)
    both = sum(d and k for d, k, _ in pairs)
    precision = both / decided if decided else None
    recall = both / knew if knew else None
    f1 = 2 * precision * recall / (precision + recall) if precision and recall else None
    return {
        "knew": knew,
        "no_search": decided,
        "no_search_right": sum(d and r for d, _, r in pairs),
        "searched_though_knew": knew - both,
        "precision": precision,
        "recall": recall,
        "f1_aware": f1,
    }


def format_card(name: str, card: dict[str, Any]) -> str:
    """``card`` in a line or more: the failed episodes and each kind's count with its interval,
    the gold passages shown (against the oracle's queries, where the card has them) and
    AdaSearch's decisions (where it has them)."""
    kinds = ", ".join(f"{kind} {v['count']} [{v['low']}, {v['high']}]" for kind, v in card["kinds"].items())
    shown = (
        f"; gold passages shown {card['gold_shown']:.0%}, all of a task's {card['all_gold_shown']:.0%}"
        if card["gold_shown"] is not None
        else "; no evidence annotations: retrieval and reading misses cannot be told apart"
    )
    if card.get("recall_vs_oracle") is not None:
        shown += f" (the oracle's queries {card['oracle_gold_shown']:.0%}: {card['recall_vs_oracle']:.2f}x)"
    line = f"{name}: {card['failed']} of {card['n']} failed" + (f": {kinds}" if kinds else "") + shown
    ada = card.get("decisions")
    if ada:
        f1 = "undefined" if ada["f1_aware"] is None else f"{ada['f1_aware']:.3f}"
        line += (
            f"\n{name}: closed-book right (knew) {ada['knew']}; "
            f"answered without searching {ada['no_search']} "
            f"({ada['no_search_right']} right); searched though it knew {ada['searched_though_knew']}; "
            f"AdaSearch F1-aware {f1}"
        )
    return line


@functools.cache
def _analyzer() -> LuceneAnalyzer:
    return LuceneAnalyzer()


def _terms(text: str) -> set[str]:
    return set(_analyzer()(text))
