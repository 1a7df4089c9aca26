"""Episodes JSONL read lazily: line offsets, one line read on demand, every line checked once."""

import json

import pytest
from viewer_runs import injection_episode, train_episode

from searchgym.errors import ConfigError
from searchgym.viewer.jsonl import BRIEF, NUMBERS, LineIndex, summarize_line


def test_line_index_skips_blank_lines_and_a_line_still_being_written(tmp_path):
    path = tmp_path / "a.jsonl"
    rows = [train_episode(1, 0, t).to_dict() for t in range(3)]
    text = (
        json.dumps(rows[0])
        + "\n\n"
        + json.dumps(rows[1])
        + "\n"
        + json.dumps(rows[2])
        + "\n"
        + '{"task_id": "cut'
    )
    path.write_text(text, encoding="utf-8")
    index = LineIndex(path)
    assert len(index) == 3
    assert [index.row(i)["task_id"] for i in range(3)] == ["task-0", "task-1", "task-2"]
    with pytest.raises(IndexError, match="has 3 lines"):
        index.raw(3)
    path.write_text(
        text[: text.rindex("\n") + 1] + json.dumps(rows[0]), encoding="utf-8"
    )  # complete, no newline
    assert len(LineIndex(path)) == 4


def test_a_line_that_is_not_an_episode_says_so_with_its_number_in_the_file(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"a": 1}\n\nnot json\n', encoding="utf-8")
    index = LineIndex(path)
    with pytest.raises(ConfigError, match="no turns: not an episode"):
        index.row(0)
    with pytest.raises(ConfigError, match="not JSON"):
        index.row(1)
    assert [index.line_number(i) for i in range(2)] == [1, 3]  # blank lines count in the file
    not_json = "line 3: not JSON (Expecting value: line 1 column 1 (char 0))"
    assert index.summaries().reasons == ("line 1: no turns: not an episode", not_json)


def test_a_last_line_too_long_to_be_one_being_written_counts_as_a_line(tmp_path, monkeypatch):
    from searchgym.viewer import jsonl

    monkeypatch.setattr(jsonl, "MAX_LINE_BYTES", 100)
    path = tmp_path / "long.jsonl"
    path.write_text('{"turns": []}\n' + "x" * 101, encoding="utf-8")
    index = LineIndex(path)
    assert len(index) == 2
    assert index.summaries().reasons == ("line 2: 101 bytes long, more than the 100 bytes a line may have",)
    with pytest.raises(ConfigError, match="101 bytes long"):
        index.row(1)


@pytest.mark.parametrize("episode", [train_episode(1, 0, 1), train_episode(4, 1, 2), injection_episode()])
def test_summary_read_without_the_turns_equals_the_full_parse(episode):
    row = {**episode.to_dict(), "step": 7, "group": 1}
    numbers, brief = summarize_line(json.dumps(row).encode())
    values = dict(zip(NUMBERS, numbers))
    assert values["n_turns"] == len(episode.turns) and values["hops"] == episode.metadata["hops"]
    assert values["em"] == episode.em and values["total_reward"] == pytest.approx(episode.total_reward)
    assert (values["n_invalid"], values["n_searches"], values["step"], values["group"]) == (
        episode.n_invalid,
        episode.n_searches,
        7,
        1,
    )
    assert brief == {k: row[k] for k in BRIEF}
    # the same line in another key order (and compact) goes the slow way to the same summary
    shuffled = json.dumps(dict(reversed(list(row.items()))), separators=(",", ":")).encode()
    assert summarize_line(shuffled) == (numbers, brief)
