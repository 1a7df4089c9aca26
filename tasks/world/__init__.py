"""The generated world: fictional entities, an encyclopedia corpus and multi-hop questions.

A seeded generator of people, cities, countries, organisations, universities and creative works
with random facts, written up as short encyclopedia passages, and 1-4-hop questions whose gold
evidence chain names one passage per hop. No model has seen it and it needs no download.

>>> world = load_world(seed=0, n_passages=300)
>>> task = world.tasks("dev", hops=2)[0]
>>> len(task.evidence)
2
"""

from __future__ import annotations

import difflib
import functools
import json
import random
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from searchgym.errors import ConfigError
from searchgym.tasks.task import Task, TaskSet

from .config import WorldConfig
from .entities import build_entities
from .names import NameBook
from .passages import render_passages
from .passages import vocabulary as passage_vocabulary
from .questions import SPLITS, make_questions
from .questions import vocabulary as question_vocabulary

__all__ = ["World", "WorldConfig", "generate_world", "load_world"]


class World:
    """A generated world: its corpus, its entity table and its questions per split.

    Build one with `generate_world` or `load_world`; treat it (passages included) as read-only.
    """

    def __init__(
        self,
        config: WorldConfig,
        passages: Sequence[dict[str, str]],
        entities: Sequence[dict[str, Any]],
        questions: dict[str, dict[int, list[Task]]],
    ) -> None:
        self._config = config
        self._passages = tuple(passages)
        self._entities = tuple(entities)
        self._questions = questions

    @property
    def config(self) -> WorldConfig:
        return self._config

    @property
    def passages(self) -> tuple[dict[str, str], ...]:
        """The corpus in id order: ``{"id", "title", "text"}`` per passage."""
        return self._passages

    @property
    def entities(self) -> tuple[dict[str, Any], ...]:
        """The entity table: id, kind, name, aliases, facts (literals or entity ids), look-alikes,
        passage ids per section, and the facts also stated outside the entity's own passage
        (which no question asks)."""
        return self._entities

    def tasks(self, split: str, hops: int | Sequence[int] | None = None) -> TaskSet:
        """The questions of ``split`` ("train", "dev" or "test"), all hop counts or those given."""
        if split not in SPLITS:
            close = difflib.get_close_matches(str(split), SPLITS, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ConfigError(f"unknown split {split!r}; {hint}choose one of {', '.join(SPLITS)}")
        wanted = self._hop_counts(hops)
        tasks = [t for h in wanted for t in self._questions[split][h]]
        if not tasks:
            raise ConfigError(
                f"the world has no {split} questions with {hops or 'any'} hops; raise "
                f"WorldConfig.{split}_per_hop or n_passages (now {self._config.n_passages})"
            )
        suffix = "" if hops is None else "/" + "+".join(f"{h}hop" for h in wanted)
        return TaskSet(f"fictional/{split}{suffix}", tasks)

    def write(self, out_dir: str | Path) -> Path:
        """Write corpus.jsonl, train/dev/test.jsonl and world.json into ``out_dir``; return it."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        _write_jsonl(out / "corpus.jsonl", self._passages)
        for split in SPLITS:
            rows = [t.to_dict() for h in sorted(self._questions[split]) for t in
                    self._questions[split][h]]  # fmt: skip
            _write_jsonl(out / f"{split}.jsonl", rows)
        table = {"config": asdict(self._config), "entities": list(self._entities)}
        (out / "world.json").write_text(_dumps(table) + "\n", encoding="utf-8")
        return out

    def __repr__(self) -> str:
        n = {s: sum(len(v) for v in self._questions[s].values()) for s in SPLITS}
        return (
            f"World(seed={self._config.seed}, passages={len(self._passages)}, "
            f"entities={len(self._entities)}, questions={n})"
        )

    def _hop_counts(self, hops: int | Sequence[int] | None) -> list[int]:
        top = self._config.max_hops
        wanted = list(range(1, top + 1)) if hops is None else (
            [hops] if isinstance(hops, int) else list(hops))  # fmt: skip
        for h in wanted:
            if isinstance(h, bool) or not isinstance(h, int) or not 1 <= h <= top:
                raise ConfigError(
                    f"hops must be whole numbers from 1 to {top} (this world's max_hops), got "
                    f"{h!r}; pass e.g. hops=2 or hops=[1, 2]"
                )
        return sorted(set(wanted))


def generate_world(config: WorldConfig | None = None) -> World:
    """Generate the world ``config`` describes (the default world when None); deterministic."""
    config = config if config is not None else WorldConfig()
    seed = config.seed
    reserved = passage_vocabulary() | question_vocabulary()
    book = NameBook(random.Random(f"searchgym-world/{seed}/names"), reserved)
    entities = build_entities(seed, config.n_passages, book)
    drafts, leaks = render_passages(entities, book, seed)

    order = list(range(len(drafts)))
    random.Random(f"searchgym-world/{seed}/ids").shuffle(order)
    by_id = {e.id: e for e in entities}
    passages: list[dict[str, str]] = []
    for i, d in enumerate(drafts[j] for j in order):
        doc_id = f"w{seed}-{i:06d}"
        by_id[d.entity_id].passages[d.section] = doc_id
        passages.append({"id": doc_id, "title": d.title, "text": d.text})

    questions = make_questions(entities, leaks, seed, config.max_hops, config.per_hop)
    elsewhere: dict[str, list[str]] = {}
    for entity_id, fact in sorted(leaks):
        elsewhere.setdefault(entity_id, []).append(fact)
    table = [{**e.to_dict(), "stated_elsewhere": elsewhere.get(e.id, [])} for e in entities]
    return World(config, passages, table, questions)


def load_world(seed: int = 0, n_passages: int = 2000) -> World:
    """The world for ``seed`` and ``n_passages`` with default question counts, built once per
    process: every later call with the same values returns the same object."""
    return _load_world(seed, n_passages)


@functools.lru_cache(maxsize=8)
def _load_world(seed: int, n_passages: int) -> World:  # positional, so one cache key per world
    return generate_world(WorldConfig(seed=seed, n_passages=n_passages))


def _dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, sort_keys=True)


def _write_jsonl(path: Path, rows: Sequence[Any]) -> None:
    with path.open("w", encoding="utf-8", newline="\n") as f:
        for row in rows:
            f.write(_dumps(row) + "\n")
