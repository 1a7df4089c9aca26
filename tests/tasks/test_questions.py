"""A user's questions as a JSONL file (`searchgym.tasks.questions`), wherever a task set is given:
`tasks.load`, every env's ``task_set`` option, ``searchgym eval -E task_set=...`` and a train
config's ``env_kwargs``; bad files fail with the file, the line and the field at fault."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

import searchgym
from searchgym import tasks
from searchgym.agents.train.config import load_config
from searchgym.agents.train.schedule import check_splits_apart, make_env
from searchgym.cli import main
from searchgym.errors import ConfigError, DataNotFoundError

FIXTURES = Path(__file__).parents[1] / "fixtures"
SMALL = {"n_passages": 300}  # a small generated world: its index builds in a second
ROWS = [
    {"id": "q1", "question": "Which city is the capital of France?", "answers": ["Paris"], "split": "dev"},
    {
        "question": "Which city is the capital of Germany?",
        "answers": "Berlin",
        "evidence": ["d3"],
        "metadata": {"hops": 1},
        "split": "dev",
    },  # fmt: skip
    {
        "id": 7,
        "question": "Where do the Rhône and the Saône meet?",
        "golden_answers": ["Lyon"],
        "split": "train",
    },
    {"question": "What is the largest city of France?", "answers": ["Paris"]},  # in every split
]


def write(path: Path, rows: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


@pytest.fixture
def questions(tmp_path) -> Path:
    return write(tmp_path / "questions.jsonl", ROWS)


def test_a_questions_file_loads_by_split_with_its_fields_and_defaults(questions):
    dev = tasks.load(str(questions), split="dev")
    assert dev.name == "questions.jsonl/dev" and [t.id for t in dev] == ["q1", "questions/2", "questions/4"]
    assert dev[1].answers == ("Berlin",) and dev[1].evidence == ("d3",) and dev[1].metadata == {"hops": 1}
    train = tasks.load(questions, split="train")  # a Path too
    assert [(t.id, t.answers) for t in train] == [("7", ("Lyon",)), ("questions/4", ("Paris",))]
    assert len(tasks.load(str(questions), split="test")) == 1  # only the line without a split


def test_a_file_without_splits_serves_every_split(tmp_path):
    path = write(
        tmp_path / "plain.jsonl",
        [{"question": "q?", "answers": ["a"]}, "", {"question": "r?", "answers": ["b"]}],
    )
    for split in ("train", "dev", "test"):
        loaded = tasks.load(str(path), split=split)
        assert loaded.name == "plain.jsonl" and [t.id for t in loaded] == ["plain/1", "plain/3"]


BAD_LINES = [
    ("not json", r":2: not valid JSON \(Expecting value at column 1\)"),
    ("[1, 2]", r":2: expected a JSON object such as .*, got list"),
    ({"question": "q?"}, r":2: no 'answers' field; every line needs question and answers"),
    ({"answers": ["a"]}, r":2: no 'question' field"),
    ({"question": " ", "answers": ["a"]}, r":2: 'question' must be a non-empty string, got ' '"),
    (
        {"question": "q?", "answers": []},
        r":2: 'answers' must be a non-empty list of non-empty strings, got \[\]",
    ),
    ({"question": "q?", "answers": [5]}, r":2: 'answers' must be a non-empty list .*got \[5\]"),
    (
        {"question": "q?", "answers": ["a"], "evidence": "d1"},
        r":2: 'evidence' must be a list of document ids",
    ),
    ({"question": "q?", "answers": ["a"], "metadata": [1]}, r":2: 'metadata' must be a JSON object"),
    ({"question": "q?", "answers": ["a"], "id": None}, r":2: 'id' must be a non-empty string or an integer"),
    ({"question": "q?", "answers": ["a"], "split": 3}, r":2: 'split' must be a non-empty string"),
    (
        {"question": "q?", "anwsers": ["a"]},
        r":2: unknown field\(s\) \['anwsers'\]; a line's fields are id, q",
    ),
    ({"id": "q1", "question": "q?", "answers": ["a"]}, r":2: id 'q1' is used by an earlier line"),
]


@pytest.mark.parametrize(("line", "pattern"), BAD_LINES)
def test_a_bad_line_names_its_file_line_and_field(tmp_path, line, pattern):
    path = write(tmp_path / "bad.jsonl", [ROWS[0], line])
    with pytest.raises(ConfigError, match=re.escape(str(path)) + pattern):
        tasks.load(str(path))


def test_a_missing_empty_or_non_utf8_file_and_an_empty_split_are_clear_errors(tmp_path, questions):
    with pytest.raises(
        DataNotFoundError, match=r"questions file .*nope.jsonl does not exist \(a task set ending"
    ):
        tasks.load(str(tmp_path / "nope.jsonl"))
    with pytest.raises(ConfigError, match=r"empty.jsonl holds no questions; write one JSON object a line"):
        tasks.load(str(write(tmp_path / "empty.jsonl", ["", "  "])))
    (tmp_path / "latin1.jsonl").write_bytes(
        '{"question": "caf\u00e9?", "answers": ["a"]}\n'.encode("latin-1")
    )
    with pytest.raises(ConfigError, match=r"latin1.jsonl:1: not UTF-8 text"):
        tasks.load(str(tmp_path / "latin1.jsonl"))
    only_train = write(tmp_path / "train.jsonl", [ROWS[2]])
    empty_split = (
        r"train.jsonl has no questions in split 'dev'; its lines' \"split\" fields name train \(choose"
    )
    with pytest.raises(ConfigError, match=empty_split):
        tasks.load(str(only_train), split="dev")
    with pytest.raises(ConfigError, match=r"a questions file takes no options, got \['seed'\]"):
        tasks.load(str(questions), seed=1)
    (tmp_path / "questions.txt").write_text(questions.read_text())
    with pytest.raises(
        ConfigError, match=r"questions.txt' is a file, not a task set name: name a file of questions \*.jsonl"
    ):
        tasks.load(str(tmp_path / "questions.txt"))


def test_every_env_takes_a_questions_file_as_its_task_set(questions):
    """The env poses the file's questions of its split over its own corpus; hops do not apply."""
    for env_id, options in [
        ("searchgym/FictionalQA-BM25-v0", SMALL),
        ("searchgym/FictionalQA-SelfSearch-v0", SMALL),
        ("searchgym/FictionalQA-Planner-v0", SMALL),
    ]:
        env = searchgym.make(env_id, task_set=str(questions), split="train", **options)
        assert [t.id for t in env.unwrapped.tasks] == ["7", "questions/4"], env_id
        observation, info = env.reset(seed=0)
        assert info["task"].question in observation
        env.close()
    env = searchgym.make(
        "searchgym/FictionalQA-BM25-v0", task_set="fictional-3hop", **SMALL
    )  # a name works too
    assert {t.metadata["hops"] for t in env.unwrapped.tasks} == {3}
    with pytest.raises(
        ConfigError, match=r"hops picks among the generated world's questions and does not apply"
    ):
        searchgym.make("searchgym/FictionalQA-BM25-v0", task_set=str(questions), hops=2, **SMALL)
    with pytest.raises(ConfigError, match=r"task_set is a task set name or a questions .jsonl file, got 3"):
        searchgym.make("searchgym/FictionalQA-BM25-v0", task_set=3, **SMALL)


def eval_json(argv: list[str], capsys) -> dict:
    assert main(["eval", *argv, "--no-progress", "--json"]) == 0
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_eval_plays_a_questions_file_over_the_world_and_over_a_tiny_corpus(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "world.jsonl", [
        {"id": "q1", "question": "On which continent is Dinavia?", "answers": ["Themica"]},
        {"id": "q2", "question": "Where did the president of Kraelico Polytechnic study?",
         "answers": ["Tolion Institute of Technology"], "split": "test"},
    ])  # fmt: skip
    report = eval_json(["--agent", "oracle,heuristic", "-E", "task_set=world.jsonl", "--out", "w"], capsys)
    assert report["tasks"] == "tasks: 1 of the 1 of world.jsonl/dev" and report["env_kwargs"] == {
        "task_set": "world.jsonl"
    }
    assert (
        report["agents"]["heuristic"]["all"]["em"] == 1.0 and report["agents"]["oracle"]["all"]["em"] == 1.0
    )
    episode = json.loads((tmp_path / "w" / "heuristic.jsonl").read_text().splitlines()[0])
    assert episode["task_id"] == "q1"

    # your questions over your corpus: an index of the tiny corpus, searched by the benchmark env
    shutil.copy(FIXTURES / "tiny_corpus.jsonl", tmp_path / "corpus.jsonl")
    assert main(["index", "build", "--corpus", "corpus.jsonl", "--out", "idx", "--no-progress"]) == 0
    capsys.readouterr()
    cities = write(tmp_path / "cities.jsonl", ROWS)
    argv = [
        "--env",
        "searchgym/NQ-BM25-v0",
        "-E",
        "index_dir=idx",
        "-E",
        f"task_set={cities.name}",
        "-E",
        "split=dev",
    ]
    report = eval_json([*argv, "--agent", "heuristic", "--out", "c"], capsys)
    assert report["tasks"] == "tasks: 3 of the 3 of cities.jsonl/dev; hops 1 ×1"
    episodes = [json.loads(line) for line in (tmp_path / "c" / "heuristic.jsonl").read_text().splitlines()]
    assert {ep["task_id"]: ep["em"] for ep in episodes} == {"q1": 1.0, "cities/2": 1.0, "cities/4": 1.0}


@pytest.mark.parametrize(
    ("option", "pattern"),
    [
        ("task_set=missing.jsonl", r"questions file missing.jsonl does not exist"),
        ("task_set=bad.jsonl", r"bad.jsonl:2: no 'answers' field"),
        ("task_set=train.jsonl", r"train.jsonl has no questions in split 'dev'"),
    ],
)
def test_eval_on_a_bad_questions_file_exits_2_with_one_line(tmp_path, capsys, monkeypatch, option, pattern):
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "bad.jsonl", [ROWS[0], {"question": "q?"}])
    write(tmp_path / "train.jsonl", [ROWS[2]])
    assert main(["eval", "-E", option, "-E", "n_passages=300", "--agent", "oracle", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err and re.search(pattern, err), err


def test_a_train_config_takes_a_questions_file_and_keeps_its_splits_apart(tmp_path, questions):
    config = tmp_path / "mine.yaml"
    config.write_text(f"env_kwargs: {{task_set: {questions}, n_passages: 300}}\neval_tasks: 3\n")
    cfg = load_config(config)
    train, dev = make_env(cfg, cfg.train_split), make_env(cfg, cfg.eval_split)
    assert [t.id for t in train.unwrapped.tasks] == ["7", "questions/4"]
    assert [t.id for t in dev.unwrapped.tasks] == ["q1", "questions/2", "questions/4"]
    # the line without a split is in both: train refuses to evaluate on a question it trains on
    with pytest.raises(ConfigError, match=r"'What is the largest city of France\?'.*\"split\" field"):
        check_splits_apart(cfg)
    write(questions, ROWS[:3])
    check_splits_apart(cfg)


def test_every_registered_env_takes_a_task_set():
    """As docs/environments.md says."""
    import inspect

    from searchgym.envs.registry import env_factory

    for env_id in searchgym.list_ids():
        creator = env_factory(env_id)
        assert "task_set" in inspect.signature(creator).parameters, env_id
