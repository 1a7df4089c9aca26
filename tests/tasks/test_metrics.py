"""Answer metrics: hand-worked cases and properties that must hold for any strings."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from searchgym.tasks.metrics import (
    AnswerScores,
    cover_em,
    exact_match,
    f1,
    normalize_answer,
    score_answer,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # case and articles (whole words only)
        ("The Cat", "cat"),
        ("an apple a day", "apple day"),
        ("Theater of the Absurd", "theater of absurd"),
        ("Anathema", "anathema"),
        ("A", ""),
        # ASCII punctuation is deleted, not replaced by a space (SQuAD)
        ("Hello, world!", "hello world"),
        ("U.S.A.", "usa"),
        ("$100", "100"),
        ("rock'n'roll", "rocknroll"),
        # whitespace
        ("  New \t York\n City ", "new york city"),
        ("", ""),
        ("the . ,", ""),
        # Unicode: accents kept, NFKC folds full-width forms, Unicode punctuation deleted
        ("Café", "café"),
        ("Cafe\u0301", "café"),
        ("Ｔｏｋｙｏ　２０２０", "tokyo 2020"),
        ("“Hello” — world", "hello world"),
        ("«Les Misérables»", "les misérables"),
        ("¿Qué pasa?", "qué pasa"),
        ("1939–1945", "19391945"),
        ("Straße", "strasse"),
    ],
)
def test_normalize_answer(text: str, expected: str) -> None:
    assert normalize_answer(text) == expected


def test_unicode_and_ascii_dashes_normalise_alike() -> None:
    assert normalize_answer("Jean–Paul Sartre") == normalize_answer("Jean-Paul Sartre")
    assert normalize_answer("it’s") == normalize_answer("it's")


@pytest.mark.parametrize(
    ("prediction", "answers", "expected"),
    [
        ("The Eiffel Tower.", ["eiffel tower"], 1.0),
        ("EIFFEL   tower", ["The Eiffel Tower"], 1.0),
        ("Eiffel", ["Eiffel Tower"], 0.0),
        ("NYC", ["New York City", "NYC"], 1.0),
        ("Ｐａｒｉｓ", ["paris"], 1.0),
        ("Café", ["cafe"], 0.0),  # accents are kept
        ("", [""], 1.0),
        ("the", ["."], 1.0),  # both empty after normalisation
        ("", ["x"], 0.0),
        ("x", [""], 0.0),
    ],
)
def test_exact_match(prediction: str, answers: list[str], expected: float) -> None:
    assert exact_match(prediction, answers) == expected


@pytest.mark.parametrize(
    ("prediction", "answers", "expected"),
    [
        # [quick, brown, fox] vs [quick, fox, jumps]: overlap 2, P = R = 2/3
        ("the quick brown fox", ["quick fox jumps"], 2 / 3),
        # [red, red, blue] vs [red, green]: overlap counts red once, P = 1/3, R = 1/2 -> 2/5
        ("red red blue", ["red green"], 0.4),
        # max over golds: 2/3 against "obama", 0.8 against "barack hussein obama"
        ("Barack Obama", ["Obama", "Barack Hussein Obama"], 0.8),
        ("Paris", ["London"], 0.0),
        ("The Beatles!", ["beatles"], 1.0),
        ("", [""], 1.0),
        ("", ["x"], 0.0),
        ("x", ["the"], 0.0),
    ],
)
def test_f1(prediction: str, answers: list[str], expected: float) -> None:
    assert f1(prediction, answers) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("prediction", "answers", "expected"),
    [
        ("He was born in 1932.", ["1932"], 1.0),
        ("He was born in 1932.", ["1"], 0.0),  # token boundaries, not substrings
        ("He was born in 1932.", ["193"], 0.0),
        ("New York City is big", ["York City"], 1.0),
        ("New York City is big", ["City York"], 0.0),  # order matters
        ("a New Yorker", ["York"], 0.0),
        ("It is The Beatles!", ["beatles"], 1.0),
        ("Paris", ["London", "Paris"], 1.0),
        ("Paris", ["Paris, France"], 0.0),  # gold longer than prediction
        ("", [""], 1.0),
        ("something", [""], 0.0),
        ("", ["x"], 0.0),
    ],
)
def test_cover_em(prediction: str, answers: list[str], expected: float) -> None:
    assert cover_em(prediction, answers) == expected


def test_score_answer_gives_all_three() -> None:
    scores = score_answer("Paris, France", ["Paris"])
    assert scores == AnswerScores(em=0.0, f1=pytest.approx(2 / 3), cover_em=1.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        scores.em = 1.0  # type: ignore[misc]


@pytest.mark.parametrize("metric", [exact_match, f1, cover_em, score_answer])
def test_bare_string_answers_is_a_type_error(metric) -> None:
    with pytest.raises(TypeError, match=r"answers must be a list of strings.*\['Paris'\]"):
        metric("Paris", "Paris")


@pytest.mark.parametrize("metric", [exact_match, f1, cover_em, score_answer])
def test_no_answers_is_a_value_error(metric) -> None:
    with pytest.raises(ValueError, match="at least one gold answer"):
        metric("Paris", [])


def test_non_string_inputs_are_type_errors() -> None:
    with pytest.raises(TypeError, match="prediction must be a str"):
        exact_match(None, ["x"])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="every gold answer must be a str"):
        f1("x", ["x", None])  # type: ignore[list-item]


def test_answers_may_be_any_sequence() -> None:
    assert exact_match("paris", ("London", "Paris")) == 1.0


@given(prediction=st.text(), answers=st.lists(st.text(), min_size=1, max_size=4))
def test_metric_properties(prediction: str, answers: list[str]) -> None:
    scores = score_answer(prediction, answers)
    assert scores == AnswerScores(
        exact_match(prediction, answers), f1(prediction, answers), cover_em(prediction, answers)
    )
    assert scores.em in (0.0, 1.0) and scores.cover_em in (0.0, 1.0)
    assert 0.0 <= scores.em <= scores.cover_em <= 1.0
    assert 0.0 <= scores.em <= scores.f1 <= 1.0
    if scores.cover_em:
        assert scores.f1 > 0.0
    assert score_answer(prediction, [*answers, prediction]).em == 1.0


@pytest.mark.parametrize("text", ["ß\u0301", "Ŀ\u0301", "⒞\u0301"])
def test_normalize_answer_recomposes_after_casefold_and_punctuation(text: str) -> None:
    once = normalize_answer(text)
    assert normalize_answer(once) == once


@given(st.text())
def test_normalize_answer_is_idempotent(text: str) -> None:
    once = normalize_answer(text)
    assert normalize_answer(once) == once
