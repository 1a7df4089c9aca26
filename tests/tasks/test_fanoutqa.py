"""FanOutQA's questions over the mini-wiki corpus (`searchgym.tasks.fanoutqa`).

``tests/fixtures/fanoutqa/corpora/miniwiki.jsonl`` holds the 67 rows of the real mini-wiki corpus
(data_scripts/fetch_miniwiki.py, ids and text unchanged) that state the answer of a FanOutQA
sub-question whose page they are. No other row can make a question kept, so the task set over
them is the one over the whole corpus, which
`test_the_fixture_is_the_real_corpus_where_it_is_fetched` checks wherever that corpus is fetched.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest
from doc_blocks import doc_block

import searchgym
from searchgym.agents import HeuristicAgent, OracleAgent, run_episodes, summarize
from searchgym.cli import main
from searchgym.errors import ConfigError, DataNotFoundError, DependencyNotInstalled
from searchgym.tasks import fanoutqa as fq
from searchgym.tasks.metrics import normalize_answer
from searchgym.tasks.miniwiki import miniwiki_path

fanoutqa = pytest.importorskip(
    "fanoutqa", reason='fanoutqa is an optional extra: pip install "searchgym[fanoutqa]"'
)

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "fanoutqa"
ENV_ID = "searchgym/FanOutQA-BM25-v0"


def corpus_rows(data_dir: Path = FIXTURE) -> dict[str, dict[str, str]]:
    lines = miniwiki_path(data_dir).read_text(encoding="utf-8").splitlines()
    return {row["id"]: row for row in map(json.loads, lines)}


def test_kept_questions_per_split():
    train, dev = (fq.load_fanoutqa(split, data_dir=FIXTURE) for split in ("train", "dev"))
    assert (len(train), len(dev)) == (45, 31)
    assert all(t.metadata["hops"] == 1 == len(t.evidence) for t in [*train, *dev])  # no multi-hop
    assert dev.name == "fanoutqa/dev" and all(t.id.startswith("fanoutqa/dev/") for t in dev)
    russia = next(t for t in dev if t.question == "What is the capital of Russia?")
    assert russia.answers == ("Moscow",) and corpus_rows()[russia.evidence[0]]["title"] == "Russia"
    assert len(russia.metadata["fanoutqa_question_ids"]) == 3  # asked in three FanOutQA questions
    lena = next(t for t in dev if t.question == "What country is the Lena river originated in?")
    assert lena.metadata["chain"][0]["entity"] == "Lena River"  # FanOutQA's page is "Lena (river)"


def test_fanoutqa_is_a_task_set():
    loaded = searchgym.tasks.load("fanoutqa", split="dev", data_dir=FIXTURE)
    assert loaded.name == "fanoutqa/dev" and list(loaded) == list(fq.load_fanoutqa("dev", data_dir=FIXTURE))


def test_every_evidence_id_is_a_corpus_paragraph_that_states_the_answer():
    rows = corpus_rows()
    for split in fq.SPLITS:
        for task in fq.load_fanoutqa(split, data_dir=FIXTURE):
            [hop] = task.metadata["chain"]
            row = rows[task.evidence[0]]
            assert (hop["doc_id"], hop["entity"], hop["query"]) == (row["id"], row["title"], row["title"])
            text = f" {normalize_answer(row['text'])} "
            assert all(f" {normalize_answer(a)} " in text for a in task.answers), task


def test_splits_share_no_question_and_no_evidence():
    train, dev = (fq.load_fanoutqa(split, data_dir=FIXTURE) for split in ("train", "dev"))
    for key in (lambda t: t.question.strip().lower(), lambda t: normalize_answer(t.question)):
        assert not {key(t) for t in train} & {key(t) for t in dev}  # what `searchgym train` refuses
        assert len({key(t) for t in [*train, *dev]}) == len(train) + len(dev)
    assert not {d for t in train for d in t.evidence} & {d for t in dev for d in t.evidence}


def test_the_fixture_is_the_real_corpus_where_it_is_fetched():
    real = miniwiki_path()
    if not real.is_file():
        pytest.skip(f"the mini-wiki corpus is not fetched ({real}): python data_scripts/fetch_miniwiki.py")
    full = corpus_rows(real.parents[1])
    assert all(full[doc_id] == row for doc_id, row in corpus_rows().items())
    for split in fq.SPLITS:
        assert list(fq.load_fanoutqa(split)) == list(fq.load_fanoutqa(split, data_dir=FIXTURE))


def question(qid, text, answer, *, title=None, decomposition=(), depends_on=()):
    evidence = None if title is None else {"pageid": 1, "revid": 1, "title": title, "url": "u"}
    row = {"id": qid, "question": text, "answer": answer, "decomposition": list(decomposition)}
    return {**row, "depends_on": list(depends_on), "evidence": evidence}


def test_the_rules_on_a_small_fanoutqa_file(tmp_path):
    corpus = [
        ("d1", "Lena River", "The Lena is a river of Russia. Yakutsk is the largest city on its banks."),
        ("d2", "Yakutsk", "Yakutsk is a city in Russia with a population of 355,443."),
        ("d3", "Paris", "Paris is the capital of France."),
        ("d4", "Cell (biology)", "The cell is the unit of life."),
        ("d5", "Cell biology", "Cell biology studies the unit of life."),
    ]
    city = question("s1", "What is the largest city on the Lena?", "Yakutsk", title="Lena (river)")
    size = question("s2", "What is the population of Yakutsk?", 355443, title="Yakutsk", depends_on=["s1"])
    rows = [
        {
            **question("q1", "How many people live in the largest city on the Lena?", 355443.0),
            "categories": [],
        },
        {
            **question("q2", "Capitals?", {"France": "Paris"}),
            "categories": [],
            "decomposition": [
                question("s3", "What is the capital of France?", ["Paris"], title="Paris"),
                question("s4", "Is Paris in France?", True, title="Paris"),
                question("s5", "What is the unit of life?", "cell", title="cell_biology"),  # two keys
                question("s6", "When was Yakutsk founded?", "1632", title="Yakutsk"),  # not stated
            ],
        },
        {
            **question("q3", "Where is the Louvre?", "Paris"),
            "categories": [],
            "decomposition": [question("s7", "what is the capital of France", "Paris", title="Paris")],
        },
    ]
    rows[0]["decomposition"] = [city, size]
    path = tmp_path / "dev.json"
    path.write_text(json.dumps(rows), encoding="utf-8")
    tasks = fq.fanoutqa_tasks(fanoutqa.load_dev(path), corpus)
    by_question = {t.question: t for split in fq.SPLITS for t in tasks[split]}
    assert sorted(by_question) == [
        "How many people live in the largest city on the Lena?",
        "What is the capital of France?",
        "What is the largest city on the Lena?",
        "What is the population of Yakutsk?",
        "Where is the Louvre?",
    ]
    two_hop = by_question["How many people live in the largest city on the Lena?"]
    assert two_hop.evidence == ("d1", "d2") and two_hop.answers == ("355443",)
    assert two_hop.metadata["hops"] == 2 and [h["query"] for h in two_hop.metadata["chain"]] == [
        "Lena River",
        "Yakutsk",
    ]
    capital = by_question["What is the capital of France?"]  # asked twice: one task
    assert capital.answers == ("Paris",) and capital.metadata["fanoutqa_question_ids"] == ["q2", "q3"]
    assert capital.id.endswith("/s3") and by_question["Where is the Louvre?"].evidence == ("d3",)


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("Moscow", ("Moscow",)),
        (8848.86, ("8848.86",)),
        (1.0, ("1",)),
        (["Wright brothers"], ("Wright brothers",)),
        (["Iran", "Iraq"], ()),
        ({"Uranus": "William Herschel"}, ()),
        (False, ()),
        ([True], ()),
        ("  ", ()),
    ],
)
def test_answer_strings(answer, expected):
    assert fq.answer_strings(answer) == expected


def test_errors_say_how_to_fix(tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match="unknown split 'test'; choose one of train, dev"):
        fq.load_fanoutqa("test", data_dir=FIXTURE)
    with pytest.raises(DataNotFoundError, match=r"python data_scripts/fetch_miniwiki.py --out .*miniwiki"):
        fq.load_fanoutqa("dev", data_dir=tmp_path)
    path = miniwiki_path(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text('{"id": "x", "title": "Quellmoor Abbey", "text": "A ruined abbey."}\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="evidence of no FanOutQA dev question; is it the mini-Wikipedia"):
        fq.load_fanoutqa("dev", data_dir=tmp_path)
    monkeypatch.setitem(sys.modules, "fanoutqa", None)  # as if it were not installed
    path.write_text(path.read_text() + "\n", encoding="utf-8")  # a new version of the file: read again
    with pytest.raises(DependencyNotInstalled, match=r'pip install "searchgym\[fanoutqa\]"'):
        fq.load_fanoutqa("dev", data_dir=tmp_path)


def test_the_env_makes_resets_and_steps():
    env = searchgym.make(ENV_ID, data_dir=FIXTURE)
    assert len(env.unwrapped.tasks) == 31 and ENV_ID in searchgym.list_ids()
    task = next(t for t in env.unwrapped.tasks if t.question == "What is the capital of Russia?")
    obs, info = env.reset(seed=0, options={"task": task})
    assert info["question"] == task.question and task.question in obs
    obs, reward, terminated, truncated, info = env.step("<search>Russia</search>")
    assert not (terminated or truncated) and info["tool"] == "search" and task.evidence[0] in info["doc_ids"]
    obs, reward, terminated, truncated, info = env.step("<answer>Moscow</answer>")
    assert terminated and not truncated and info["em"] == 1.0 and reward > 0
    env.close()


@pytest.fixture(scope="module")
def dev_episodes():
    env_fn = lambda: searchgym.make(ENV_ID, data_dir=FIXTURE, split="dev")  # noqa: E731
    dev = env_fn().unwrapped.tasks
    return {
        agent.__name__: summarize(run_episodes(env_fn, agent, dev)) for agent in (OracleAgent, HeuristicAgent)
    }


def test_the_oracle_finds_every_evidence_page_and_answers(dev_episodes):
    """Among the 67 paragraphs of the fixture, each page's title finds it; over the whole corpus
    it is in BM25's top 3 for 22 of the 31 (docs/fanoutqa.md). Its answer is the gold one."""
    oracle = dev_episodes["OracleAgent"]
    assert oracle["n"] == 31 and oracle["em"] == 1.0 and oracle["evidence_recall"] == 1.0


def test_the_heuristic_runs(dev_episodes):
    heuristic = dev_episodes["HeuristicAgent"]
    assert heuristic["n"] == 31 and heuristic["searches"] == 1.0 and heuristic["invalid_rate"] == 0.0
    assert 0.0 < heuristic["em"] < 1.0


def test_the_docs_eval_command_runs_as_written(tmp_path, monkeypatch, capsys):
    """docs/fanoutqa.md's command, verbatim, over the fixture's paragraphs (the page's figures are
    over the whole corpus, where BM25 misses more pages)."""
    [command] = [line for line in doc_block("fanoutqa.md", "bash").splitlines() if line.strip()]
    argv = shlex.split(command)
    assert argv[:2] == ["searchgym", "eval"]
    monkeypatch.setenv("SEARCHGYM_DATA", str(FIXTURE))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    assert main(argv[1:]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{ENV_ID}\ntasks: 31 of the 31 of fanoutqa/dev; hops 1 ×31  seed 0\n")
    rows = {cells[0]: cells for cells in map(str.split, out.splitlines()) if cells[1:2] == ["all"]}
    assert rows.keys() == {"oracle", "heuristic"} and rows["oracle"][3] == "1.000"


def test_the_docs_python_example_runs_as_written(monkeypatch, capsys):
    monkeypatch.setenv("SEARCHGYM_DATA", str(FIXTURE))
    exec(compile(doc_block("fanoutqa.md", "python"), "docs/fanoutqa.md", "exec"), {})
    assert capsys.readouterr().out.splitlines() == [
        "What is the origin city of The Beatles? ('Liverpool',)",
        "True",
    ]
