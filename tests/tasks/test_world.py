"""Contracts of the generated world: determinism, size, sound evidence chains, unique answers."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from searchgym.errors import ConfigError
from searchgym.tasks.world import World, WorldConfig, generate_world, load_world
from searchgym.tasks.world.entities import RELATIONS
from searchgym.tasks.world.names import normalise
from searchgym.tasks.world.templates import SECTIONS
from searchgym.tasks.world.vocab import WORK_KINDS

SMALL = WorldConfig(seed=3, n_passages=600, train_per_hop=120, dev_per_hop=40, test_per_hop=40)
FILES = ("corpus.jsonl", "train.jsonl", "dev.jsonl", "test.jsonl", "world.json")


@pytest.fixture(scope="module")
def world() -> World:
    return generate_world(SMALL)


def all_tasks(world: World):
    return [t for split in ("train", "dev", "test") for t in world.tasks(split)]


def digests(out: Path) -> dict[str, str]:
    return {name: hashlib.sha256((out / name).read_bytes()).hexdigest() for name in FILES}


def test_same_config_writes_identical_files(world: World, tmp_path: Path) -> None:
    first = digests(world.write(tmp_path / "a"))
    assert digests(generate_world(SMALL).write(tmp_path / "b")) == first


def test_same_config_writes_identical_files_in_another_process(world: World, tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from searchgym.tasks.world import WorldConfig, generate_world\n"
        f"generate_world({SMALL!r}).write(sys.argv[1])\n"
    )
    for hash_seed in ("1", "4242"):  # str hashing differs per process; output must not
        out = tmp_path / f"proc{hash_seed}"
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        subprocess.run([sys.executable, "-c", code, str(out)], check=True, env=env)
        assert digests(out) == digests(world.write(tmp_path / "here"))


def test_different_seeds_give_different_worlds(world: World) -> None:
    other = generate_world(WorldConfig(seed=4, n_passages=600, train_per_hop=10))
    names = {e["name"] for e in world.entities}
    assert len(names & {e["name"] for e in other.entities}) < 0.05 * len(names)
    assert world.passages[0]["text"] != other.passages[0]["text"]


@pytest.mark.parametrize("n", [300, 1000, 4000])
def test_corpus_size_is_within_ten_percent(n: int) -> None:
    world = generate_world(WorldConfig(n_passages=n, train_per_hop=0, dev_per_hop=5,
                                       test_per_hop=5))  # fmt: skip
    assert abs(len(world.passages) - n) <= 0.1 * n


def test_passages_have_sorted_ids_titles_and_40_to_120_words(world: World) -> None:
    ids = [p["id"] for p in world.passages]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    assert all(re.fullmatch(r"w3-\d{6}", i) for i in ids)
    for p in world.passages:
        assert set(p) == {"id", "title", "text"}
        assert 40 <= len(p["text"].split()) <= 120, p
        assert p["title"].split(" (")[0] in p["text"]


def test_every_hop_is_stated_in_its_evidence_passage(world: World) -> None:
    text = {p["id"]: p["text"] for p in world.passages}
    for task in all_tasks(world):
        chain = task.metadata["chain"]
        assert len(chain) == len(task.evidence) == task.metadata["hops"]
        assert [c["doc_id"] for c in chain] == list(task.evidence)
        for i, step in enumerate(chain):
            passage = text[step["doc_id"]]
            following = chain[i + 1]["entity"] if i + 1 < len(chain) else task.answers[0]
            assert step["entity"] in passage and following in passage, (task, step)
            assert step["query"].startswith(step["entity"])


def test_no_question_asks_a_fact_stated_outside_its_passage(world: World) -> None:
    by_name = {e["name"]: e for e in world.entities}
    for task in all_tasks(world):
        for step in task.metadata["chain"]:
            assert step["relation"] not in by_name[step["entity"]]["stated_elsewhere"]


def test_answers_and_roots_are_unique(world: World) -> None:
    owners: dict[str, list[str]] = {}
    for e in world.entities:
        for name in {normalise(n) for n in (e["name"], *e["aliases"])}:
            owners.setdefault(name, []).append(e["id"])
    assert all(len(ids) == 1 for ids in owners.values())
    for task in all_tasks(world):
        chain = task.metadata["chain"]
        names = [c["entity"] for c in chain]
        assert len(set(names)) == len(names), task
        assert names[0] in task.question  # the root is named ...
        assert all(n not in task.question for n in names[1:])  # ... the rest must be found
        question = f" {normalise(task.question)} "
        assert not any(f" {normalise(a)} " in question for a in task.answers), task
        if task.metadata["answer_type"] in ("person", "city", "country", "organisation",
                                            "university"):  # fmt: skip
            assert len({owners[normalise(a)][0] for a in task.answers}) == 1


def test_splits_are_disjoint_and_hops_1_to_4_present(world: World) -> None:
    questions, chains = {}, {}
    for split in ("train", "dev", "test"):
        tasks = world.tasks(split)
        questions[split] = {t.question for t in tasks}
        chains[split] = {(t.metadata["chain"][0]["entity"],
                          *(c["relation"] for c in t.metadata["chain"])) for t in tasks}  # fmt: skip
        assert len(questions[split]) == len(tasks)
        for hops in (1, 2, 3, 4):
            subset = world.tasks(split, hops=hops)
            assert {t.metadata["hops"] for t in subset} == {hops}
            assert all(re.fullmatch(rf"fictional/{split}/{hops}hop/\d{{6}}", t.id) for t in subset)
    for a, b in (("train", "dev"), ("train", "test"), ("dev", "test")):
        assert not questions[a] & questions[b]
        assert not chains[a] & chains[b]
    assert len(world.tasks("dev", hops=[1, 2])) == 80


def test_task_metadata_shape(world: World) -> None:
    task = world.tasks("test", hops=3)[0]
    assert task.metadata["source"] == "fictional"
    assert set(task.metadata) == {"source", "hops", "answer_type", "chain"}
    assert all(set(c) == {"entity", "relation", "doc_id", "title", "query"} for c in task.metadata["chain"])
    titles = {p["id"]: p["title"] for p in world.passages}
    assert all(titles[c["doc_id"]] == c["title"] for c in task.metadata["chain"])  # the passage's own


def test_near_duplicate_names_exist_and_have_their_own_facts(world: World) -> None:
    by_id = {e["id"]: e for e in world.entities}
    pairs = [(e, by_id[o]) for e in world.entities for o in e["lookalikes"] if e["id"] < o]
    assert len(pairs) > 0.08 * len(world.entities)
    for a, b in pairs:
        assert a["kind"] == b["kind"] and a["name"] != b["name"]
        assert set(a["name"].split()) & set(b["name"].split()) or _one_letter_apart(a, b)
        assert set(a["passages"].values()).isdisjoint(b["passages"].values())
    assert {a["kind"] for a, _ in pairs} >= {"person", "city", "organisation", "work"}
    texts = " ".join(p["text"] for p in world.passages)
    assert texts.count("confused with") + texts.count("similarly named") >= len(pairs)


def _one_letter_apart(a: dict, b: dict) -> bool:
    x, y = a["name"], b["name"]
    return len(x) == len(y) and sum(c != d for c, d in zip(x, y, strict=True)) == 1


def test_templates_name_the_words_their_queries_search_for() -> None:
    for (kind, section), tpl in SECTIONS.items():
        for fact, templates in tpl.facts.items():
            covering = [t for facts, t in tpl.openings if fact in facts]
            for template in (*templates, *covering):
                for kind_words in WORK_KINDS.values() if kind == "work" else [{}]:
                    words = RELATIONS[(kind, fact)].query.format(n="", **kind_words).split()
                    text = re.findall(r"\w+", template.format_map(_Blank(kind_words)).lower())
                    assert all(w in text for w in words if w not in ("by", "in")), template
        if kind == "person":  # a person's two passages keep their query words apart
            other = {"early life": ("career", "employer", "studied"), "career": ("born", "married")}
            everything = [t for _, t in tpl.openings] + [t for v in tpl.facts.values() for t in v]
            everything += [*tpl.flavour, *(t for _, _, t in tpl.distractors)]
            for template in everything:
                assert not set(re.findall(r"\w+", template.lower())) & set(other[section])


class _Blank(dict):
    def __missing__(self, key: str) -> str:
        return ""


def test_chain_queries_retrieve_their_evidence_with_bm25() -> None:
    bm25s = pytest.importorskip("bm25s")
    world = load_world(seed=0, n_passages=2000)
    ids = [p["id"] for p in world.passages]
    retriever = bm25s.BM25()
    corpus = [f"{p['title']} {p['text']}" for p in world.passages]
    retriever.index(bm25s.tokenize(corpus, stopwords="en", show_progress=False),
                    show_progress=False)  # fmt: skip
    tasks = [*world.tasks("dev"), *world.tasks("test")]
    steps = [c for t in tasks for c in t.metadata["chain"]]

    def recall(queries: list[str], gold: list[str]) -> float:
        tokens = bm25s.tokenize(queries, stopwords="en", show_progress=False)
        found, _ = retriever.retrieve(tokens, k=3, show_progress=False)
        return sum(ids.index(g) in row for g, row in zip(gold, found, strict=True)) / len(gold)

    hop_recall = recall([c["query"] for c in steps], [c["doc_id"] for c in steps])
    question_recall = recall([t.question for t in tasks], [t.evidence[0] for t in tasks])
    assert hop_recall >= 0.95
    assert question_recall >= 0.5  # the root is named in the question


def test_load_world_is_memoised() -> None:
    assert load_world(seed=0, n_passages=2000) is load_world(0, 2000)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_passages": 10}, r"n_passages must be between 300 and 500,000, got 10; .*n_passages=300"),
        ({"max_hops": 5}, r"max_hops must be between 1 and 4, got 5"),
        ({"seed": -1}, r"seed must be >= 0"),
        ({"dev_per_hop": -2}, r"dev_per_hop must be >= 0, got -2; use 0"),
        ({"seed": "7"}, r"seed must be an int, got '7' \(str\)"),
        ({"n_passages": 2000.0}, r"n_passages must be an int"),
    ],
)
def test_invalid_config_says_how_to_fix(kwargs: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        WorldConfig(**kwargs)


def test_bad_task_queries_say_how_to_fix(world: World) -> None:
    with pytest.raises(ConfigError, match=r"unknown split 'tset'; did you mean 'test'\?"):
        world.tasks("tset")
    with pytest.raises(ConfigError, match=r"hops must be whole numbers from 1 to 4.*got 5"):
        world.tasks("dev", hops=5)
    empty = generate_world(WorldConfig(n_passages=300, train_per_hop=0, dev_per_hop=1,
                                       test_per_hop=1))  # fmt: skip
    with pytest.raises(ConfigError, match=r"no train questions.*raise WorldConfig.train_per_hop"):
        empty.tasks("train")


@pytest.mark.slow
def test_a_100k_passage_world_is_generated_in_linear_time() -> None:
    """10× the passages take about 10× the time (quadratic work would take 100×); timed against
    a 10k world in the same process, so machine load cancels out."""
    start = time.perf_counter()
    generate_world(WorldConfig(seed=1, n_passages=10_000))
    small = time.perf_counter() - start
    start = time.perf_counter()
    world = generate_world(WorldConfig(seed=1, n_passages=100_000))
    large = time.perf_counter() - start
    assert abs(len(world.passages) - 100_000) <= 10_000
    assert len({e["name"] for e in world.entities}) == len(world.entities)
    assert all(len(world.tasks("test", hops=h)) == 200 for h in (1, 2, 3, 4))
    assert large < 25 * small, f"100k passages took {large / small:.1f}× as long as 10k"


def test_questions_cannot_be_answered_from_priors(world: World) -> None:
    """The best guess without reading — the commonest train answer of the same answer type —
    rarely scores: values are drawn at random, so only the corpus tells the answer."""
    from collections import Counter

    from searchgym.tasks.metrics import exact_match

    prior: dict[str, Counter] = {}
    for t in world.tasks("train"):
        prior.setdefault(t.metadata["answer_type"], Counter())[t.answers[0]] += 1
    dev = world.tasks("dev")
    guesses = [prior.get(t.metadata["answer_type"], Counter({"": 1})).most_common(1)[0][0] for t in dev]
    em = sum(exact_match(g, t.answers) for g, t in zip(guesses, dev)) / len(dev)
    assert em < 0.1
