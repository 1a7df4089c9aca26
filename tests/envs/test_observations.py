"""Observation tokens count text, not just words: prose counts its words and marks, and a limit
of n tokens bounds what the agent is shown to ``CHARS_PER_TOKEN * n`` characters whatever the
text's shape; pages split into parts that each fit, losing nothing; search results are bounded."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from searchgym.envs.observations import (
    CHARS_PER_TOKEN,
    TRUNCATION_MARK,
    count_tokens,
    count_words,
    format_docs,
    truncate_tokens,
)
from searchgym.envs.web_tools import MAX_RESULT_TOKENS, format_results, paginate
from searchgym.retrievers import read_corpus
from searchgym.retrievers.web import SearchResult

# words long and short, spaces, tabs, line ends and marks, in any mix
PIECES = ["a", "bb", "x" * 40, " ", "   ", "\t", "\n", ".", "é", "日本語"]
TEXT = st.lists(st.sampled_from(PIECES), max_size=300).map("".join)


def test_prose_counts_its_words_and_marks(tiny_corpus_path):
    docs = read_corpus(tiny_corpus_path)
    assert count_tokens("Doc 1(Title: Paris) Capital of France.") == 11
    text = format_docs(docs)
    assert count_tokens(text) == count_words(text)
    assert all(count_tokens(d.text) == count_words(d.text) for d in docs)


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("x" * 1_000_000, 1_000_000 // CHARS_PER_TOKEN + 1),  # one word of a million characters
        ("a" + " " * 999_999, 1_000_000 // CHARS_PER_TOKEN + 1),  # one word and a million spaces
        ("日本語" * 1000, 500),  # a script without spaces is one regex word
        (". " * 1000, 1000),  # marks count one each
    ],
)
def test_long_words_and_runs_of_spaces_count_by_their_length(text, tokens):
    assert count_tokens(text) == max(count_words(text), -(-len(text) // CHARS_PER_TOKEN)) == tokens


@pytest.mark.parametrize("max_tokens", [1, 12, 512])
def test_a_million_character_word_is_cut_to_the_limits_characters(max_tokens):
    text = "Doc 1(Title: Long) " + "x" * 1_000_000
    cut = truncate_tokens(text, max_tokens)
    kept = cut.removesuffix(TRUNCATION_MARK)
    assert cut.endswith(TRUNCATION_MARK) and text.startswith(kept)
    assert len(kept) <= CHARS_PER_TOKEN * max_tokens and count_tokens(kept) <= max_tokens
    assert count_tokens(cut) <= max_tokens + count_tokens(TRUNCATION_MARK)


@settings(max_examples=300, deadline=None)
@given(TEXT, st.integers(1, 40))
def test_truncation_keeps_a_prefix_within_both_bounds(text, max_tokens):
    cut = truncate_tokens(text, max_tokens)
    if count_tokens(text) <= max_tokens:
        assert cut == text
    else:
        kept = cut.removesuffix(TRUNCATION_MARK)
        assert text.startswith(kept) and count_tokens(kept) <= max_tokens


@settings(max_examples=300, deadline=None)
@given(TEXT, st.integers(1, 40))
def test_every_part_fits_and_nothing_is_lost(text, page_tokens):
    parts = paginate(text, page_tokens)
    assert all(count_tokens(p) <= page_tokens for p in parts)
    assert all(len(p) <= CHARS_PER_TOKEN * page_tokens for p in parts)
    assert "".join("".join(parts).split()) == "".join(text.split())


def test_words_are_split_only_when_longer_than_half_a_part():
    text = "\n".join(" ".join(["abcdefgh"] * 30 + ["y" * 55]) for _ in range(5))
    parts = paginate(text, 20)  # 120 characters a part, which 20 of these words overrun
    assert all(len(p) <= 120 and len(p.split()) < 20 for p in parts)
    assert " ".join(parts).split() == text.split()
    assert [len(p) for p in paginate("a " + "x" * 300, 20)] == [120, 120, 62]


def test_a_search_result_shows_a_bounded_title_and_snippet():
    text = format_results([SearchResult("t" * 1_000_000, "https://w.test/a", "s " * 1_000_000)])
    title, url, snippet = text.split("\n")
    assert url == "URL: https://w.test/a" and title.startswith("1. ttt") and snippet.startswith("s s")
    bound = CHARS_PER_TOKEN * MAX_RESULT_TOKENS + len(TRUNCATION_MARK)
    assert len(title) <= bound + 3 and len(snippet) <= bound
