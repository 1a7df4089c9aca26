"""Mini-Wikipedia "which subject" tasks, on small corpora the tests write."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from searchgym import tasks
from searchgym.errors import ConfigError, DataNotFoundError
from searchgym.tasks.metrics import normalize_answer
from searchgym.tasks.miniwiki import (
    MASK,
    aliases,
    load_miniwiki,
    mask_subject,
    miniwiki_path,
    question_for,
    split_of,
    split_sentences,
)

PARAGRAPHS = [
    (
        "Ada Lovelace",
        "Ada Lovelace (1815–1852) was an English mathematician and writer. "
        "Lovelace wrote detailed notes on the proposed mechanical general-purpose computer of "
        "Charles Babbage, including an algorithm for computing Bernoulli numbers.",
    ),
    (
        "Mercury (planet)",
        "Mercury is the smallest planet in the Solar System and the closest to the Sun. "
        "Because mercury has almost no atmosphere, its surface temperature swings from extreme heat "
        "during the day to severe cold during the night.",
    ),
    (
        "Tomato",
        "The tomato is the edible berry of the plant Solanum lycopersicum, known as the tomato plant. "
        "It is widely grown in temperate climates across the world.",
    ),
    ("Short", "Short is short. It is."),
]


def write_corpus(data_dir: Path, paragraphs: list[tuple[str, str]]) -> Path:
    path = miniwiki_path(data_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [{"id": f"miniwiki-{i:05d}", "title": t, "text": x} for i, (t, x) in enumerate(paragraphs)]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def generated_paragraphs(n: int) -> list[tuple[str, str]]:
    """``n`` paragraphs about made-up places, two usable sentences each."""
    out = []
    for i in range(n):
        name = f"Quellmoor{chr(97 + i % 26)}{chr(97 + i // 26)} Abbey"
        out.append(
            (
                name,
                f"{name} is a ruined monastery near the river number {i} in the northern hills. "
                f"Pilgrims visiting {name} admire painted ceilings, carved wooden doors and a walled garden.",
            )
        )
    return out


def test_split_sentences_keeps_initials_and_abbreviations():
    text = "Arthur C. Clarke wrote it. Dr. Smith (b. 1950) read it in the U.S. Army! Was it good?"
    assert split_sentences(text) == [
        "Arthur C. Clarke wrote it.",
        "Dr. Smith (b. 1950) read it in the U.S. Army!",
        "Was it good?",
    ]


def test_aliases_drop_the_disambiguation():
    assert aliases("Mercury (planet)") == ("Mercury (planet)", "Mercury")
    assert aliases("Tomato") == ("Tomato",)


@pytest.mark.parametrize(
    ("sentence", "title", "person", "expected"),
    [
        ("The tomato and tomatoes, Tomato's.", "Tomato", False, "The ___ and ___, ___'s."),
        ("Tomatoesque tomatillo", "Tomato", False, "Tomatoesque tomatillo"),  # whole words only
        ("Mercury orbits; mercury (planet) too.", "Mercury (planet)", False, "___ orbits; ___ too."),
        ("Lovelace met Ada Lovelace.", "Ada Lovelace", True, "___ met ___."),
        ("Lovelace met Ada Lovelace.", "Ada Lovelace", False, "Lovelace met ___."),
        ("lovelace is no surname here", "Ada Lovelace", True, "lovelace is no surname here"),
    ],
)
def test_mask_subject(sentence, title, person, expected):
    assert mask_subject(sentence, title, person=person) == expected


def test_question_masks_a_later_sentence_and_answers_with_the_title():
    task = question_for("miniwiki-00000", *PARAGRAPHS[0])
    assert task is not None
    hop = task.metadata["chain"][0]
    assert hop["query"] == (
        "___ wrote detailed notes on the proposed mechanical general-purpose computer of Charles "
        "Babbage, including an algorithm for computing Bernoulli numbers."
    )  # the second sentence: a person's surname alone is masked too
    assert (
        task.question == f'Which subject is masked as {MASK} in this encyclopedia sentence? "{hop["query"]}"'
    )
    assert task.answers == ("Ada Lovelace",)
    assert task.evidence == ("miniwiki-00000",)
    assert hop == {
        "entity": "Ada Lovelace",
        "relation": "subject",
        "doc_id": "miniwiki-00000",
        "query": hop["query"],
    }
    assert task.metadata["sentence_index"] == 1 and task.metadata["hops"] == 1
    assert task.id == f"miniwiki/{split_of('Ada Lovelace')}/miniwiki-00000"


def test_first_sentence_only_when_no_other_qualifies():
    task = question_for("t", *PARAGRAPHS[2])  # the second sentence says "It": no mention to mask
    assert task is not None and task.metadata["sentence_index"] == 0
    assert task.metadata["chain"][0]["query"].startswith("The ___ is the edible berry")
    assert question_for("s", *PARAGRAPHS[3]) is None  # too little left to search for


def test_disambiguated_title_accepts_both_answers():
    task = question_for("m", *PARAGRAPHS[1])
    assert task is not None and task.answers == ("Mercury (planet)", "Mercury")
    assert task.metadata["chain"][0]["query"].startswith("Because ___ has almost no atmosphere")


def test_no_question_gives_its_answer_away():
    paragraphs = [
        (
            "Blue whale",
            "The blue whale is the largest marine mammal known to have ever existed on Earth. "
            "Whale songs of the blue whale carry across oceans.",
        ),
        (
            "Rust (fungus)",
            "Rust is a plant disease caused by fungi. Wheat rust destroys crops of wheat and barley.",
        ),
    ]
    for i, (title, text) in enumerate(paragraphs + generated_paragraphs(30) + PARAGRAPHS):
        task = question_for(str(i), title, text)
        if task is None:
            continue
        query = task.metadata["chain"][0]["query"]
        assert MASK in query
        padded = f" {normalize_answer(task.question)} "
        assert not any(f" {normalize_answer(a)} " in padded for a in task.answers), task.question
    whale = question_for("w", *paragraphs[0])
    assert whale is not None and whale.metadata["sentence_index"] == 0  # "Whale songs" leaks a title word


def test_splits_are_stable_disjoint_and_complete(tmp_path):
    write_corpus(tmp_path, generated_paragraphs(60))
    by_split = {
        split: tasks.load("miniwiki", split=split, data_dir=tmp_path) for split in ("train", "dev", "test")
    }
    ids = [t.id for s in by_split.values() for t in s]
    assert len(ids) == len(set(ids)) == 60  # every paragraph gives one question here
    assert all(t.id.startswith(f"miniwiki/{split}/") for split, s in by_split.items() for t in s)
    assert [len(s) for s in by_split.values()] == [49, 5, 6]  # the 80/10/10 hash of these titles
    # a split depends on the title alone: pinned so that a change of hash never reshuffles splits
    assert [split_of(t) for t in ("Ada Lovelace", "Tomato", "Paris", "Mercury (planet)")] == [
        "test",
        "train",
        "train",
        "train",
    ]
    again = load_miniwiki("dev", data_dir=tmp_path)
    assert [t.id for t in again] == [t.id for t in by_split["dev"]]
    assert by_split["dev"].name == "miniwiki/dev"


def test_rewritten_corpus_is_read_again(tmp_path):
    path = write_corpus(tmp_path, generated_paragraphs(60))
    before = load_miniwiki("train", data_dir=tmp_path)
    path.write_text(path.read_text("utf-8").splitlines()[0] + "\n", encoding="utf-8")
    assert len(load_miniwiki("train", data_dir=tmp_path)) == 1 != len(before)


def test_default_data_dir_is_searchgym_data(tmp_path, monkeypatch):
    monkeypatch.setenv("SEARCHGYM_DATA", str(tmp_path))
    write_corpus(tmp_path, generated_paragraphs(60))
    assert len(load_miniwiki("train")) == 49


def test_missing_corpus_names_the_fetch_command(tmp_path):
    with pytest.raises(
        DataNotFoundError, match=r"create it with: python data_scripts/fetch_miniwiki.py --out .*miniwiki"
    ):
        tasks.load("miniwiki", split="dev", data_dir=tmp_path)


def test_bad_split_and_bad_rows(tmp_path):
    write_corpus(tmp_path, PARAGRAPHS)
    with pytest.raises(ConfigError, match="unknown split 'valid'; choose one of train, dev, test"):
        load_miniwiki("valid", data_dir=tmp_path)
    with miniwiki_path(tmp_path).open("a") as f:
        f.write('{"id": "x", "contents": "wrong shape"}\n')
    with pytest.raises(ConfigError, match=r"line 5: expected a JSON row \{\"id\", \"title\", \"text\"\}"):
        load_miniwiki("train", data_dir=tmp_path)


def test_unknown_task_set_names_the_closest():
    with pytest.raises(ConfigError, match=r"unknown task set 'mini-wiki'. Did you mean 'miniwiki'\?"):
        tasks.load("mini-wiki")
