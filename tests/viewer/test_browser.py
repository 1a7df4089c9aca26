"""The viewer in a real headless Chromium: a directory made by `searchgym eval` is filtered, an
episode opened (gold evidence and rewards checked against the JSONL), two agents compared; the
training and sweep pages drawn; script in a trajectory shown as text, never run; the static
export works from a file. Screenshots go to each test's tmp dir."""

import re

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
from viewer_runs import INJECTION

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
    assert summary["eval-bm25 · heuristic"][1].text == f"{em:.3f}"
    assert re.fullmatch(r"\[\d\.\d{3}, \d\.\d{3}\]", summary["eval-bm25 · heuristic"][2].text)
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
