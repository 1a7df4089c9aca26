"""The viewer in a real headless Chromium: a directory made by `searchgym eval` is filtered, an
episode opened (gold evidence and rewards checked against the JSONL), two agents compared; the
training and sweep pages drawn; script in a trajectory shown as text, never run; the static
export works from a file. Screenshots go to each test's tmp dir."""

import json
import re
import shutil

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select
from viewer_browser import (
    console_errors,
    rerendered,
    screenshot,
    show,
    start_chromium,
    stop_chromium,
    wait_for,
)
from viewer_runs import INJECTION, MALFORMED, train_metrics, write_broken_run, write_step

from searchgym.agents import load_episodes
from searchgym.viewer import ViewerServer, create_app, export_html

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def driver():
    chromium = start_chromium()
    yield chromium
    stop_chromium(chromium)


@pytest.fixture(scope="module")
def server(eval_dir, train_dir, sweep_dir, injection_dir):
    with ViewerServer(create_app([eval_dir, train_dir, sweep_dir, injection_dir])) as viewer:
        yield viewer


def texts(driver, css):
    return [e.text for e in driver.find_elements(By.CSS_SELECTOR, css)]


def action_key(action):
    return re.sub(r"\s+", " ", re.sub(r"<think>.*?</think>", "", action, flags=re.S)).strip().lower()


def test_filter_open_an_episode_and_compare_two_agents(driver, server, eval_dir, tmp_path):
    heuristic, oracle = load_episodes(eval_dir / "heuristic.jsonl"), load_episodes(eval_dir / "oracle.jsonl")
    show(driver, server.url + "#/episodes?runs=0", summary=True)
    summary = {
        row.find_element(By.TAG_NAME, "th").text: row.find_elements(By.TAG_NAME, "td")
        for row in driver.find_elements(By.CSS_SELECTOR, "table.summary tbody tr")
    }
    assert set(summary) == {"eval-bm25 · heuristic", "eval-bm25 · oracle"}
    em = sum(ep.em for ep in heuristic) / len(heuristic)
    assert summary["eval-bm25 · heuristic"][0].text == "searchgym/FictionalQA-BM25-v0"  # the env column
    assert summary["eval-bm25 · heuristic"][2].text == f"{em:.3f}"
    assert re.fullmatch(r"\[\d\.\d{3}, \d\.\d{3}\]", summary["eval-bm25 · heuristic"][3].text)
    screenshot(driver, tmp_path, "list")

    # filter: the heuristic's failures
    rerendered(driver, lambda: Select(driver.find_element(By.NAME, "outcome")).select_by_value("failed"))
    wait_for(driver, "document.querySelector('[data-summary=ready]')")
    failed = sum(ep.em == 0 for ep in heuristic + oracle)
    assert f"of {failed} episodes" in driver.find_element(By.CSS_SELECTOR, ".pager .count").text
    assert set(texts(driver, "tr.ep-row td.em-cell")) == {"EM 0"}
    rerendered(
        driver,
        lambda: Select(driver.find_element(By.NAME, "sources")).select_by_visible_text("eval-bm25 · oracle"),
    )
    assert "no episode matches" in driver.find_element(By.CSS_SELECTOR, ".pager .count").text

    # open the oracle's longest episode from the list
    show(driver, server.url + "#/episodes?runs=0&sources=1&sort=turns&desc=1", summary=True)
    first = driver.find_element(By.CSS_SELECTOR, "tr.ep-row")
    ep = oracle[int(first.get_attribute("data-id")) - 6]
    assert ep.n_turns == max(e.n_turns for e in oracle)
    rerendered(driver, first.click)
    assert driver.find_element(By.CSS_SELECTOR, ".ep-head .question").text == ep.question
    gold = {d for t in ep.turns for d in (t.doc_ids or []) if d in ep.evidence}
    assert (
        gold
        and {e.get_attribute("data-doc-id") for e in driver.find_elements(By.CSS_SELECTOR, ".doc.gold")}
        == gold
    )
    shown_docs = [e.get_attribute("data-doc-id") for e in driver.find_elements(By.CSS_SELECTOR, ".doc")]
    assert shown_docs == [d for t in ep.turns for d in (t.doc_ids or [])]
    assert driver.find_element(By.CSS_SELECTOR, ".ep-head .comp.total b").text == f"{ep.total_reward:g}"
    for turn, el in zip(ep.turns, driver.find_elements(By.CSS_SELECTOR, ".turn")):
        assert el.find_element(By.CSS_SELECTOR, ".comp.total b").text == f"{turn.reward:g}"
        comps = {
            c.text.rsplit(" ", 1)[0]: c.text.rsplit(" ", 1)[1]
            for c in el.find_elements(By.CSS_SELECTOR, ".comp:not(.total)")
        }
        assert comps == {k: f"{v:g}" for k, v in turn.reward_components.items()}
        assert el.find_element(By.CSS_SELECTOR, ".tokens").text == f"{turn.obs_tokens} obs tokens"
    assert len(texts(driver, ".chain li")) == ep.metadata["hops"]
    screenshot(driver, tmp_path, "episode")

    # compare: tasks the oracle solves and the heuristic does not, then one of them side by side
    show(driver, server.url + "#/compare?a=0&b=1")
    only_b = [o.task_id for h, o in zip(heuristic, oracle) if o.em == 1 and h.em == 0]
    assert [
        e.get_attribute("data-task") for e in driver.find_elements(By.CSS_SELECTOR, "tr.ep-row")
    ] == only_b
    rerendered(driver, driver.find_element(By.CSS_SELECTOR, f"tr.ep-row[data-task='{only_b[-1]}']").click)
    h_ep, o_ep = (
        heuristic[[e.task_id for e in heuristic].index(only_b[-1])],
        oracle[[e.task_id for e in oracle].index(only_b[-1])],
    )
    at = next(
        i
        for i in range(max(h_ep.n_turns, o_ep.n_turns))
        if i >= min(h_ep.n_turns, o_ep.n_turns)
        or action_key(h_ep.turns[i].action) != action_key(o_ep.turns[i].action)
    )
    marked = driver.find_elements(By.CSS_SELECTOR, ".turn.diverge")
    assert marked and {int(e.get_attribute("data-turn")) for e in marked} == {at}
    assert (
        f"diverge at turn {at + 1}"
        in driver.find_element(By.CSS_SELECTOR, ".side-by-side").find_element(By.XPATH, "..").text
    )
    screenshot(driver, tmp_path, "compare")
    assert console_errors(driver) == []


def test_training_curves_steps_and_sweep(driver, server, tmp_path):
    show(driver, server.url + "#/training")
    captions = texts(driver, "figcaption")
    for title in (
        "Reward components",
        "EM: rollout and dev (with intervals)",
        "Searches per episode",
        "Invalid-action rate",
        "Entropy",
        "KL to the reference",
        "Degenerate groups",
    ):
        assert title in captions
    em_chart = driver.find_element(By.CSS_SELECTOR, "figure[class='chart-box']:nth-of-type(2)")
    assert em_chart.find_elements(By.TAG_NAME, "polygon")  # the dev EM interval band
    assert [e.get_attribute("data-step") for e in driver.find_elements(By.CSS_SELECTOR, "tr[data-step]")] == [
        "1",
        "2",
        "3",
        "4",
    ]
    screenshot(driver, tmp_path, "training")
    link = driver.find_element(By.CSS_SELECTOR, "tr[data-step='3'] a")
    rerendered(driver, link.click)
    assert "of 6 episodes" in driver.find_element(By.CSS_SELECTOR, ".pager .count").text
    assert set(texts(driver, "tr.ep-row td.step-cell")) == {"3"}  # the step column

    show(driver, server.url + "#/sweep")
    labels = texts(driver, "svg.pareto .point-label")
    assert sorted(labels) == ["heuristic", "oracle"] and texts(driver, "svg.pareto .pick-label")
    screenshot(driver, tmp_path, "sweep")
    assert console_errors(driver) == []


def check_injection_is_text(driver):
    assert driver.execute_script("return window.__pwned") is None
    page = driver.find_element(By.ID, "app").text
    assert f"Who wrote {INJECTION}?" in page and f"A document containing {INJECTION} as text." in page
    assert f"the program raised ValueError: {INJECTION}" in page  # an agent program's error
    assert driver.execute_script("return document.querySelectorAll('#app script, #app img').length") == 0


def test_script_in_a_trajectory_is_shown_not_run(driver, server, injection_dir, tmp_path):
    show(driver, server.url + "#/episodes?runs=3", summary=True)
    assert INJECTION in driver.find_element(By.CSS_SELECTOR, "td.question").text
    rerendered(driver, driver.find_element(By.CSS_SELECTOR, "tr.ep-row").click)
    check_injection_is_text(driver)
    assert driver.find_element(By.CSS_SELECTOR, ".doc.gold .doc-title").text == f"Evil {INJECTION}"
    screenshot(driver, tmp_path, "injection-served")
    export = export_html([injection_dir], tmp_path / "evil.html")
    show(driver, export.path.as_uri() + "#/episode/0")
    check_injection_is_text(driver)


def test_the_export_works_from_a_file_like_the_server(driver, server, eval_dir, tmp_path):
    export = export_html([eval_dir], tmp_path / "viewer.html")
    show(driver, export.path.as_uri() + "#/episodes?hops=2,3&sort=searches&desc=1", summary=True)
    exported = texts(driver, "tr.ep-row td:first-child")
    show(driver, server.url + "#/episodes?runs=0&hops=2,3&sort=searches&desc=1", summary=True)
    assert texts(driver, "tr.ep-row td:first-child") == exported and exported
    show(driver, export.path.as_uri() + "#/compare?a=0&b=1")
    assert driver.find_elements(By.CSS_SELECTOR, "tr.ep-row")
    screenshot(driver, tmp_path, "export-compare")
    assert console_errors(driver) == []


def show_problem(driver, url: str) -> str:
    """Go to ``url``, wait until the view has rendered (or failed to) and return the page's text."""
    driver.execute_script("document.body && (document.body.dataset.ready = '')")
    driver.get(url)
    wait_for(driver, "document.body.dataset.ready && document.body.dataset.ready !== ''")
    return driver.find_element(By.ID, "app").text


BAD_LINKS = [
    ("#/training?run=NOPE", 'There is no training run named "NOPE". Training runs: 1 (grpo-run).'),
    (
        "#/training?run=eval-bm25",
        '"eval-bm25" is an eval run, not a training run. Training runs: 1 (grpo-run).',
    ),
    ("#/training?run=7", 'There is no training run named "7"'),
    (
        "#/training?run=<img src=x onerror=window.__pwned=3>",
        'no training run named "<img src=x onerror=window.__pwned=3>"',
    ),
    ("#/episode/abc", 'There is no episode "abc": episodes are numbered 0–48'),
    ("#/episode/99999", 'There is no episode "99999"'),
    ("#/episode/", 'There is no episode ""'),
    ("#/nowhere?x=1", 'There is no page "#/nowhere?x=1". Pages: #/episodes'),
    ("#/episodes?runs=nope", 'There is no run named "nope". Runs: 0 (eval-bm25), 1 (grpo-run)'),
    ("#/episodes?sources=999", 'sources=999: there is no agent or training step "999"'),
    ("#/episodes?sort=question", "sort=question: it must be one of index, hops"),
    ("#/episodes?limit=0", "limit=0: show 1 to 500 episodes a page."),
    ("#/episodes?hops=two", "hops=two: give hop counts as numbers"),
    ("#/episodes?colour=red", "The episodes list has no parameter colour"),
    ("#/compare?a=abc&b=1", 'a=abc: there is no agent or training step "abc"'),
    ("#/compare?a=0&b=1&show=bogus", "show=bogus: it must be one of differ"),
    ("#/compare?a=0&b=1&task=nope", "task=nope: A and B have not both played this task"),
]


@pytest.mark.parametrize(("link", "message"), BAD_LINKS, ids=[link for link, _ in BAD_LINKS])
def test_a_bad_link_shows_what_is_wrong_never_a_script_error(driver, server, link, message):
    text = show_problem(driver, server.url + link)
    assert message in text
    assert not re.search(r"TypeError|undefined|null|NaN|\[object|bug in the viewer", text), text
    assert driver.execute_script("return window.__pwned === undefined && !document.querySelector('#app img')")
    assert console_errors(driver) == []  # checked in the page: nothing was asked of the server in vain


def test_a_link_may_name_a_training_run_by_name(driver, server):
    show(driver, server.url + "#/training?run=grpo-run")
    assert driver.find_element(By.CSS_SELECTOR, "select[name=run]").get_attribute("value") == "grpo-run"
    assert (
        "env: searchgym/FictionalQA-BM25-v0 (split=train, max_turns=4, hops=[2])"
        in driver.find_element(By.CSS_SELECTOR, ".filters").text
    )


def test_bad_links_in_an_export_say_what_is_wrong_too(driver, eval_dir, tmp_path):
    export = export_html([eval_dir], tmp_path / "viewer.html")
    assert 'There is no episode "x"' in show_problem(driver, export.path.as_uri() + "#/episode/x")
    assert "There is no training run named" in show_problem(driver, export.path.as_uri() + "#/training?run=x")
    assert "sort=nope" in show_problem(driver, export.path.as_uri() + "#/episodes?sort=nope")
    assert console_errors(driver) == []


def test_every_run_is_shown_with_its_env(driver, server, tmp_path):
    show(driver, server.url + "#/episodes", summary=True)
    assert driver.find_element(By.ID, "where").text == "4 runs · 3 envs · 49 episodes"
    envs = {
        row.find_element(By.TAG_NAME, "th").text: row.find_element(By.CSS_SELECTOR, "td.env").text
        for row in driver.find_elements(By.CSS_SELECTOR, "table.summary tbody tr")
    }
    assert envs["eval-bm25 · oracle"] == "searchgym/FictionalQA-BM25-v0"
    assert envs["grpo-run"] == "searchgym/FictionalQA-BM25-v0 (split=train, max_turns=4, hops=[2])"
    runs = [o.text for o in Select(driver.find_element(By.NAME, "runs")).options]
    assert "grpo-run · searchgym/FictionalQA-BM25-v0 (split=train, max_turns=4, hops=[2])" in runs
    assert texts(driver, "tr.ep-row td.who .env")  # runs of several envs: each row names its env

    show(driver, server.url + "#/episode/0")
    facts = {e.find_element(By.CLASS_NAME, "k").text: e.find_element(By.CLASS_NAME, "v").text
             for e in driver.find_elements(By.CSS_SELECTOR, ".fact")}  # fmt: skip
    assert facts["env"] == "searchgym/FictionalQA-BM25-v0"

    show(driver, server.url + "#/compare?a=0&b=1")  # two agents of one eval: one env
    assert texts(driver, ".envs .env") == [
        "A env: searchgym/FictionalQA-BM25-v0",
        "B env: searchgym/FictionalQA-BM25-v0",
    ]
    assert not driver.find_elements(By.CSS_SELECTOR, ".env-differ")
    show(driver, server.url + "#/compare?a=1&b=2")  # the eval's oracle against a training step
    assert "played different envs" in driver.find_element(By.CSS_SELECTOR, ".env-differ").text
    screenshot(driver, tmp_path, "compare-envs")
    assert console_errors(driver) == []


def test_a_running_trainers_new_steps_appear_without_a_restart(driver, train_dir, tmp_path):
    run = tmp_path / "grpo-live"
    shutil.copytree(train_dir, run)
    with ViewerServer(create_app([run], refresh_interval=0)) as viewer:
        show(driver, viewer.url + "#/training")
        assert texts(driver, "tr[data-step] td:first-child") == ["1", "2", "3", "4"]
        write_step(run, 5)  # what the trainer writes after the viewer started
        with (run / "metrics.jsonl").open("a", encoding="utf-8") as f:
            f.write(json.dumps({"step": 5, **train_metrics(5)}) + "\n")
        wait_for(driver, "document.querySelector(\"tr[data-step='5']\")", timeout=30)  # the page polls
        assert texts(driver, "tr[data-step] td:first-child") == ["1", "2", "3", "4", "5"]
        points = driver.execute_script(
            "return [...document.querySelectorAll('figure title')].map((t) => t.textContent)"
        )
        assert any(p.startswith("rollout/em · step 5:") for p in points)  # the new metrics line
        assert "30 episodes" in driver.find_element(By.ID, "where").text
        screenshot(driver, tmp_path, "training-live")

        write_step(run, 6)  # a link to one of its episodes before the page has polled again
        show(driver, viewer.url + "#/episode/30")
        assert "grpo-live · step 6" in driver.find_element(By.CSS_SELECTOR, ".facts").text
        assert "36 episodes" in driver.find_element(By.ID, "where").text
        assert console_errors(driver) == []


def summary_rows(driver):
    """Each summary row's cells (env, episodes, EM, interval, …) by its agent or run."""
    return {
        row.find_element(By.TAG_NAME, "th").text: [td.text for td in row.find_elements(By.TAG_NAME, "td")]
        for row in driver.find_elements(By.CSS_SELECTOR, "table.summary tbody tr")
    }


def test_malformed_lines_and_files_are_skipped_and_said_so(driver, eval_dir, tmp_path):
    rows = [json.loads(line) for line in (eval_dir / "oracle.jsonl").read_text().splitlines()]
    broken = write_broken_run(
        tmp_path / "broken", rows[:3], [make(rows[0]) for make, _ in MALFORMED.values()]
    )
    (broken / "metrics.json").write_text('{"env": "searchgym/Fict')  # cut short
    bad = len(MALFORMED)
    with ViewerServer(create_app([eval_dir])) as alone:
        show(driver, alone.url + "#/episodes", summary=True)
        before = summary_rows(driver)
    with ViewerServer(create_app([eval_dir, broken])) as viewer:
        show(driver, viewer.url + "#/episodes", summary=True)
        note = wait_for(driver, "document.querySelector('.skipped-note:not([hidden])')")
        assert (
            f"{bad} malformed lines skipped in " in note.text and "broken/oracle.jsonl: line 3: " in note.text
        )
        assert "broken/metrics.json skipped: it is not valid JSON" in note.text
        after = summary_rows(driver)
        assert {k: v for k, v in after.items() if k.startswith("eval-bm25")} == before
        assert after["broken · oracle"][:2] == ["env not recorded", "3"]  # its three good episodes
        assert "of 15 episodes" in driver.find_element(By.CSS_SELECTOR, ".pager .count").text
        where = wait_for(driver, "document.querySelector('#where .skipped')")
        assert where.text == f"· ⚠ {bad} malformed lines and 1 file skipped"
        assert "15 episodes" in driver.find_element(By.ID, "where").text
        screenshot(driver, tmp_path, "skipped")

        show(driver, viewer.url + "#/episodes?runs=0", summary=True)  # the good run alone: no note
        wait_for(driver, "document.querySelector('.skipped-note[data-skipped]')")
        assert not driver.find_element(By.CSS_SELECTOR, ".skipped-note").is_displayed()
        assert console_errors(driver) == []
        text = show_problem(driver, viewer.url + f"#/episode/{12 + 2}")  # the broken run's line 3
        assert "episode 14 is line 3 of " in text and "which is skipped: not JSON" in text
        [asked] = console_errors(driver)  # only the server knows which lines are malformed: it says 400
        assert "/api/episode/14 - Failed to load resource" in asked and "400" in asked
        show(driver, viewer.url + "#/compare?a=2&b=1&show=all")  # its oracle against the good one
        assert len(driver.find_elements(By.CSS_SELECTOR, "tr.ep-row")) == 3
        wait_for(driver, "document.querySelector('.skipped-note:not([hidden])')")
        assert console_errors(driver) == []

    export = export_html([eval_dir, broken], tmp_path / "viewer.html")
    show(driver, export.path.as_uri() + "#/episodes", summary=True)
    note = wait_for(driver, "document.querySelector('.skipped-note:not([hidden])')")
    assert f"{bad} malformed lines skipped in " in note.text
    assert "of 15 episodes" in driver.find_element(By.CSS_SELECTOR, ".pager .count").text
    assert console_errors(driver) == []
