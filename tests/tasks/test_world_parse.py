"""Reading questions back into the generated world: every generated question reads back to its
own answers and chain, and text outside the world's phrasing reads as nothing."""

from __future__ import annotations

import pytest

from searchgym.tasks.world import World, WorldConfig, generate_world
from searchgym.tasks.world.parse import readings


@pytest.fixture(scope="module")
def world() -> World:
    return generate_world(
        WorldConfig(seed=3, n_passages=600, train_per_hop=120, dev_per_hop=40, test_per_hop=40)
    )


def test_every_generated_question_reads_back_to_its_own_chain_and_answers(world):
    tasks = [t for split in ("train", "dev", "test") for t in world.tasks(split)]
    assert {t.metadata["hops"] for t in tasks} == {1, 2, 3, 4}
    for task in tasks:
        (reading,) = readings(world, task.question)
        assert reading.answers == task.answers, task.question
        assert reading.evidence == task.evidence
        assert list(reading.chain) == task.metadata["chain"]


def test_case_and_spacing_do_not_matter_but_other_words_do(world):
    task = world.tasks("dev", hops=2)[0]
    spaced = "  " + task.question[0].lower() + task.question[1:].replace(" ", "   ") + " "
    assert [r.answers for r in readings(world, spaced)] == [task.answers]
    assert readings(world, task.question.rstrip("?") + " exactly?") == []
    assert readings(world, "What is the meaning of life?") == []
    assert readings(world, "Who founded Nonexistent Corporation Zq?") == []


def test_a_question_is_read_with_its_subjects_own_work_words(world):
    works = [e for e in world.entities if e["kind"] == "work"]
    film = next(e for e in works if e["work_kind"] == "film")
    novel = next(e for e in works if e["work_kind"] == "novel")
    (reading,) = readings(world, f"Who directed {film['name']}?")
    assert reading.path == ("creator",)
    assert readings(world, f"Who directed {novel['name']}?") == []  # a novel is written
    assert readings(world, f"Who wrote the film {film['name']}?") == []


def test_a_chain_is_followed_through_facts_no_question_was_generated_for(world):
    """A path the generator never drew (the spouse of a spouse leads back) is still read
    exactly: the answer is the person the question started from."""
    person = next(e for e in world.entities if e["kind"] == "person" and "spouse" in e["facts"])
    (reading,) = readings(world, f"Who is the spouse of the spouse of {person['name']}?")
    assert reading.answers[0] == person["name"] and reading.path == ("spouse", "spouse")
