"""Which runs a path holds, and what the episodes list, summary, compare and steps answer."""

import json

import pytest

from searchgym.agents import load_episodes
from searchgym.errors import ConfigError, DataNotFoundError
from searchgym.stats import bootstrap_ci
from searchgym.viewer import EpisodeTable, discover
from searchgym.viewer.query import Query


def test_discover_finds_each_kind_of_run_below_a_folder(eval_dir, train_dir, sweep_dir):
    runs = discover([eval_dir.parent, train_dir, sweep_dir])
    kinds = {r.name: r.kind for r in runs}
    assert kinds == {"eval-bm25": "eval", "grpo-run": "train", "sweep": "sweep"}
    train = next(r for r in runs if r.kind == "train")
    assert [s.label for s in train.sources] == ["step 1", "step 2", "step 3", "step 4"]
    assert train.curves[1]["loss/kl"] is None and train.curves[1]["eval/em_low"] == pytest.approx(0.4)
    ev = next(r for r in runs if r.kind == "eval")
    assert sorted(s.label for s in ev.sources) == ["heuristic", "oracle"]


def test_discover_says_what_a_run_directory_holds(tmp_path):
    with pytest.raises(DataNotFoundError, match="metrics.json and AGENT.jsonl"):
        discover([tmp_path])
    with pytest.raises(DataNotFoundError, match="does not exist"):
        discover([tmp_path / "nope"])


def reference(eval_dir):
    """Every episode of the eval directory, numbered as the table numbers them."""
    episodes = []
    for name in ("heuristic", "oracle"):  # sources in file-name order
        episodes += load_episodes(eval_dir / f"{name}.jsonl")
    return episodes


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"sort": "searches", "desc": "1"},
        {"hops": "2,3", "outcome": "failed"},
        {"sources": "1", "min_searches": "2", "sort": "reward"},
        {"text": "WHO", "invalid": "none", "errors": "none"},
        {"max_reward": "0.5", "desc": "1"},
    ],
)
def test_the_list_keeps_and_orders_what_a_plain_filter_over_the_episodes_keeps(eval_dir, params):
    table = EpisodeTable(discover([eval_dir]))
    episodes = reference(eval_dir)
    q = Query.from_params(params)
    kept = [
        i
        for i, ep in enumerate(episodes)
        if (not q.hops or ep.metadata["hops"] in q.hops)
        and (not q.sources or (i >= 6) in [s == 1 for s in q.sources])
        and (q.outcome == "any" or (ep.em == 1) == (q.outcome == "solved"))
        and (q.invalid != "none" or ep.n_invalid == 0)
        and (q.errors != "none" or ep.n_errors == 0)
        and (q.min_searches is None or ep.n_searches >= q.min_searches)
        and (q.max_reward is None or ep.total_reward <= q.max_reward)
        and q.text.lower() in (ep.question + "\n" + ep.task_id).lower()
    ]
    key = {"searches": "n_searches", "reward": "total_reward"}.get(q.sort)
    if key:
        kept.sort(key=lambda i: -getattr(episodes[i], key) if q.desc else getattr(episodes[i], key))
    elif q.desc:
        kept.reverse()
    page = table.page(q)
    assert page["total"] == len(kept)
    assert [r["id"] for r in page["rows"]] == kept
    for row in page["rows"]:
        ep = episodes[row["id"]]
        assert (row["question"], row["em"], row["turns"]) == (ep.question, ep.em, ep.n_turns)


def test_the_failure_filter_keeps_the_episodes_an_evaluation_judged_so(eval_dir):
    """`searchgym eval` saves each failed episode's kind; the list offers the kinds it found and
    keeps, for each, exactly its episodes, the kind named in every row."""
    table = EpisodeTable(discover([eval_dir]))
    episodes = reference(eval_dir)
    kinds = table.summary(Query())["facets"]["failure"]
    assert kinds and set(kinds) == {ep.failure for ep in episodes if ep.failure}
    assert table.overview()["failure_kinds"][0] == "program_error"
    for kind in kinds:
        page = table.page(Query(failure=kind, limit=500))
        assert [r["id"] for r in page["rows"]] == [i for i, ep in enumerate(episodes) if ep.failure == kind]
        assert all(r["failure"] == kind for r in page["rows"])
    assert all(r["failure"] is None for r in table.page(Query(outcome="solved"))["rows"])
    with pytest.raises(ConfigError, match="failure must be any or one of program_error, turn_limit"):
        Query.from_params({"failure": "wrong"})


def test_first_page_is_the_same_before_and_after_the_summaries_are_read(eval_dir):
    before = EpisodeTable(discover([eval_dir])).page(Query(limit=4, offset=3))
    table = EpisodeTable(discover([eval_dir]))
    _ = table.columns
    assert table.page(Query(limit=4, offset=3)) == before


def test_summary_rows_take_the_interval_of_metrics_json_only_when_nothing_is_filtered(eval_dir, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    for f in eval_dir.iterdir():
        (run / f.name).write_bytes(f.read_bytes())
    metrics = json.loads((run / "metrics.json").read_text())
    metrics["agents"]["oracle"]["all"] |= {"em_low": 0.61, "em_high": 0.99}
    for key in ("em_low", "em_high"):  # as written before eval reported intervals
        del metrics["agents"]["heuristic"]["all"][key]
    (run / "metrics.json").write_text(json.dumps(metrics))
    table = EpisodeTable(discover([run]))
    groups = {g["agent"]: g for g in table.summary(Query())["groups"]}
    assert (groups["oracle"]["em_low"], groups["oracle"]["em_high"], groups["oracle"]["ci"]) == (
        0.61,
        0.99,
        "metrics.json",
    )
    heuristic = [ep.em for ep in load_episodes(run / "heuristic.jsonl")]
    assert (groups["heuristic"]["em_low"], groups["heuristic"]["em_high"]) == bootstrap_ci(heuristic)
    assert groups["heuristic"]["ci"] == "bootstrap" and groups["heuristic"]["n"] == 6
    filtered = {g["agent"]: g for g in table.summary(Query(hops=(2,)))["groups"]}
    assert filtered["oracle"]["ci"] == "bootstrap"


def test_compare_and_steps(eval_dir, train_dir):
    table = EpisodeTable(discover([eval_dir, train_dir]))
    cmp = table.compare(0, 1)  # heuristic, oracle
    heuristic, oracle = load_episodes(eval_dir / "heuristic.jsonl"), load_episodes(eval_dir / "oracle.jsonl")
    only_b = {a.task_id for a, b in zip(heuristic, oracle) if b.em == 1 and a.em == 0}
    assert {r["task_id"] for r in cmp["rows"] if r["solved"] == "b"} == only_b and len(cmp["rows"]) == 6
    steps = table.steps(1)
    assert [s["step"] for s in steps] == [1, 2, 3, 4]
    assert [s["em"] for s in steps] == [0.0, 0.0, 1.0, 1.0] and all(s["n"] == 6 for s in steps)
    by_step = table.page(Query(runs=(1,), min_step=3, max_step=3, limit=100))
    assert by_step["total"] == 6 and {r["step"] for r in by_step["rows"]} == {3}
    with pytest.raises(ConfigError, match="there is no source 9"):
        table.compare(0, 9)


def test_query_parameters_are_checked():
    with pytest.raises(ConfigError, match="unknown parameter"):
        Query.from_params({"hop": "2"})
    with pytest.raises(ConfigError, match="sort must be one of"):
        Query.from_params({"sort": "question"})
    with pytest.raises(ConfigError, match="is not a"):
        Query.from_params({"min_searches": "many"})
    assert Query.from_params({"hops": "1,2", "desc": "1"}) == Query(hops=(1, 2), desc=True)
