"""`WebEnv`: its tools on a small hand-written site, paging, errors, both protocols, the
registered ids, and the oracle browsing the generated world's site."""

import json
import re
import warnings

import pytest
from gymnasium.utils.env_checker import check_env

import searchgym
from searchgym.agents import make_agent, run_episodes, summarize, summarize_by
from searchgym.cli import main
from searchgym.envs import RewardWeights
from searchgym.envs.observations import CHARS_PER_TOKEN, count_tokens
from searchgym.envs.web_env import WebEnv
from searchgym.envs.web_factories import fictional_web
from searchgym.envs.web_tools import paginate
from searchgym.errors import ConfigError
from searchgym.retrievers.web import FetchError, RawPage
from searchgym.retrievers.web.site import FileSource, SiteSearch
from searchgym.tasks.task import Task

BASE = "https://site.test/"
LONG = " ".join(f"Sentence {i} of the long history of Orvo." for i in range(120))
TASKS = [
    Task("t1", "Who is the mayor of Orvo?", ("Ada Quell",), evidence=("p-orvo",)),
    Task("t2", "Where was the mayor of Orvo born?", ("Brask",), evidence=("p-orvo", "p-ada")),
]
EVIDENCE = {"p-orvo": BASE + "wiki/Orvo.html", "p-ada": BASE + "wiki/Ada.html"}


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("site")
    pages = {
        "wiki/Orvo.html": "<title>Orvo</title><main><h1>Orvo</h1><table><tr><th>Mayor</th><td>"
        "<a href='Ada.html'>Ada Quell</a></td></tr></table><p>Orvo is a port. <a href='Gone.html'>Old "
        f"port</a>.</p><h2>History</h2><p>{LONG}</p></main>",
        "wiki/Ada.html": "<title>Ada Quell</title><p>Ada Quell, mayor of Orvo, was born in "
        "<a href='/wiki/Brask.html'>Brask</a>.</p>",
        "wiki/Brask.html": "<title>Brask</title><p>Brask is a city.</p>",
    }
    for rel, html in pages.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(html)
    return root


def make_env(site, **kwargs):
    source = kwargs.pop("source", None) or FileSource(site, BASE)
    return WebEnv(TASKS, SiteSearch.from_dir(site, BASE), source, evidence_urls=EVIDENCE, **kwargs)


def body(observation):
    return re.search(r"<(information|tool_response)>(.*)</\1>", observation, re.S).group(2)


def test_env_checker_passes_with_both_protocols(site):
    check_env(make_env(site), skip_render_check=True)
    check_env(make_env(site, protocol="tool_calls"), skip_render_check=True)


def test_instructions_name_every_tool(site):
    obs, info = make_env(site).reset(options={"task": TASKS[0]})
    for usage in ("<search> query </search>", "<open> url </open>", "<follow> link </follow>",
                  "<find> text </find>", "<answer> answer </answer>", "#page=2"):  # fmt: skip
        assert usage in obs
    assert obs.rstrip().endswith("Question: Who is the mayor of Orvo?")


def test_search_open_follow_find_answer(site):
    env = make_env(site, rewards=RewardWeights(per_search=0.1))
    env.reset(options={"task": TASKS[1]})
    obs, reward, terminated, truncated, info = env.step("<search>mayor of Orvo</search>")
    assert body(obs).startswith(f"1. Orvo\nURL: {BASE}wiki/Orvo.html\n")
    assert info["tool"] == "search" and info["n_searches"] == 1 and info["urls"][0] == BASE + "wiki/Orvo.html"
    assert reward == pytest.approx(-0.1) and not (terminated or truncated)

    obs, reward, *_, info = env.step(f"<open> {BASE}wiki/Orvo.html </open>")
    text = body(obs)
    assert text.startswith(f"Title: Orvo\nURL: {BASE}wiki/Orvo.html\nPart 1 of ")
    assert "Mayor | Ada Quell [1]" in text and "Old port [2]" in text
    assert info["n_opens"] == 1 and info["url"] == BASE + "wiki/Orvo.html" and info["part"] == 1

    obs, *_, info = env.step("<follow> [1] </follow>")
    assert body(obs).startswith(f"Title: Ada Quell\nURL: {BASE}wiki/Ada.html\n\nAda Quell, mayor")
    assert info["n_follows"] == 1 and info["n_opens"] == 2 and info["link"] == 1

    obs, reward, *_, info = env.step("<find> BORN </find>")
    assert body(obs) == "1 line contains 'BORN':\n(part 1) Ada Quell, mayor of Orvo, was born in Brask [1]."
    assert info["n_finds"] == 1 and reward == 0.0  # find reaches no web: no call cost

    obs, reward, terminated, truncated, info = env.step("<answer> Brask </answer>")
    assert (obs, reward, terminated, truncated) == ("", 1.0, True, False)
    assert info["em"] == 1.0 and info["evidence_recall"] == 1.0 and info["n_errors"] == 0
    answered = {"outcome": 1.0, "format": 1.0, "search_calls": 0.0, "obs_tokens_1k": 0.0}
    assert info["reward_components"] == answered  # the costs were charged at each call


def test_relative_urls_resolve_against_the_open_page(site):
    env = make_env(site)
    env.reset(options={"task": TASKS[0]})
    env.step(f"<open>{BASE}wiki/Orvo.html</open>")
    obs, *_, info = env.step("<open>Ada.html</open>")
    assert info["url"] == BASE + "wiki/Ada.html" and info["error"] is None


def test_long_pages_are_split_into_parts_and_nothing_is_lost(site):
    env = make_env(site, page_tokens=60)
    env.reset(options={"task": TASKS[0]})
    obs, *_, info = env.step(f"<open>{BASE}wiki/Orvo.html</open>")
    total = int(re.search(r"Part 1 of (\d+)", obs).group(1))
    assert total > 5 and f"To read part 2, open {BASE}wiki/Orvo.html#page=2]" in obs
    words = []
    for n in range(1, total + 1):
        obs, *_, info = env.step(f"<open>{BASE}wiki/Orvo.html#page={n}</open>")
        assert info["part"] == n and info["error"] is None
        words += body(obs).split("\n\n", 1)[1].rsplit("\n\n[Part", 1)[0].split()
    assert info["n_opens"] == 1  # the other parts come from the page already fetched
    assert "the end of the page" in obs
    full = env._cache[BASE + "wiki/Orvo.html"][0].text
    assert words == full.split()
    obs, *_, info = env.step("<find>Sentence 119 </find>")
    assert f"(part {total}) " in body(obs)
    obs, *_, info = env.step(f"<open>{BASE}wiki/Orvo.html#page={total + 1}</open>")
    assert info["error"] == f"{BASE}wiki/Orvo.html has parts 1 to {total}; there is no part {total + 1}."


def test_paginate_splits_long_lines_without_losing_words():
    text = "short line\n" + " ".join(f"w{i}" for i in range(25)) + "\nlast"
    parts = paginate(text, 10)
    assert all(len(p.split()) <= 10 for p in parts) and " ".join(parts).split() == text.split()


OPEN_ORVO = f"<open>{BASE}wiki/Orvo.html</open>"


@pytest.mark.parametrize(
    ("actions", "error"),
    [
        (["<follow>1</follow>"], "No page is open: open a page before following its links."),
        (["<find>x</find>"], "No page is open: open a page before finding text on it."),
        ([OPEN_ORVO, "<follow>3</follow>"], "There is no link [3]: the open page has links [1] to [2]."),
        ([OPEN_ORVO, "<follow>0</follow>"], "There is no link [0]"),
        ([OPEN_ORVO, "<follow>the first</follow>"], "follow takes a link number such as 3, not 'the first'."),
        ([OPEN_ORVO, "<follow>2</follow>"], f"Could not open {BASE}wiki/Gone.html (404 Not Found"),
        ([f"<open>{BASE}wiki/Brask.html</open>", "<follow>1</follow>"], "the open page has no links."),
        (["<open>ftp://x.test/a</open>"], "Cannot open 'ftp://x.test/a': give a full URL"),
        (["<open>https://elsewhere.test/</open>"], "is not on this site"),
        (["<open>http://[::1/x</open>"], "Cannot open 'http://[::1/x'"),
        ([OPEN_ORVO, "<follow>²</follow>"], "follow takes a link number such as 3, not '²'."),
        ([OPEN_ORVO, f"<follow>{'9' * 5000}</follow>"], "follow takes a link number such as 3"),
    ],
)
def test_bad_calls_are_observations_and_counted_errors(site, actions, error):
    env = make_env(site)
    env.reset(options={"task": TASKS[0]})
    for action in actions:
        obs, reward, terminated, truncated, info = env.step(action)
    assert error in info["error"] and error in body(obs)
    assert info["n_errors"] == 1 and not terminated and not truncated
    assert env.step("<answer>Ada Quell</answer>")[1] == 1.0  # the episode goes on


class FlakySource:
    """A page source whose every fetch fails as the live web can."""

    def __init__(self, error):
        self.error, self.closed = error, False

    def get(self, url):
        raise self.error

    def close(self):
        self.closed = True


@pytest.mark.parametrize(
    "error", [FetchError("page larger than 10 bytes"), TimeoutError("slow"), ConnectionError("down")]
)
def test_a_failing_web_is_an_observation(site, error):
    source = FlakySource(error)
    env = make_env(site, source=source)
    env.reset(options={"task": TASKS[0]})
    obs, *_, info = env.step(f"<open>{BASE}wiki/Orvo.html</open>")
    assert info["n_errors"] == 1 and str(error) in body(obs)
    env.close()
    assert source.closed


def test_a_page_that_is_not_html_is_an_observation(site):
    class PdfSource:
        def get(self, url):
            return RawPage(url, b"%PDF", "application/pdf")

    env = make_env(site, source=PdfSource())
    env.reset(options={"task": TASKS[0]})
    *_, info = env.step(f"<open>{BASE}x.pdf</open>")
    assert "content type is application/pdf" in info["error"]


class BigPage:
    """Every URL is a 2 MB page: one word of two million characters."""

    def get(self, url):
        return RawPage(url, b"<title>Big</title><p>" + b"x" * 2_000_000 + b"</p>", "text/html")


def test_a_two_megabyte_word_comes_in_parts_bounded_in_characters(site):
    weights = RewardWeights(per_search=0.1, per_1k_obs_tokens=1.0)
    env = make_env(site, source=BigPage(), page_tokens=600, rewards=weights)
    env.reset(options={"task": TASKS[0]})
    obs, *_ = env.step(f"<open>{BASE}big.html</open>")
    page, parts = env._cache[BASE + "big.html"]
    assert f"Part 1 of {len(parts)}" in obs and len(parts) > 500
    assert all(len(p) <= CHARS_PER_TOKEN * 600 and count_tokens(p) <= 600 for p in parts)
    assert "".join("".join(parts).split()) == "".join(page.text.split())  # nothing is cut
    for part in (1, 2, len(parts)):
        obs, reward, *_, info = env.step(f"<open>{BASE}big.html#page={part}</open>")
        assert info["part"] == part and len(body(obs)) <= CHARS_PER_TOKEN * 600 + 200  # + header, footer
        tokens = info["step_obs_tokens"]
        assert tokens == count_tokens(obs) <= 600 + 50 and len(obs) <= CHARS_PER_TOKEN * tokens
        assert reward == pytest.approx(-tokens / 1000)  # the page was fetched once, by the first open
    assert "the end of the page" in obs


def test_tool_calls_protocol_and_costs(site):
    env = make_env(site, protocol="tool_calls", rewards=RewardWeights(per_search=0.1, per_1k_obs_tokens=1.0))
    obs, _ = env.reset(options={"task": TASKS[0]})
    assert '"name": "follow"' in obs and '"name": "find"' in obs
    call = f'<tool_call>{{"name": "open", "arguments": {{"url": "{BASE}wiki/Orvo.html"}}}}</tool_call>'
    obs, reward, *_, info = env.step(call)
    assert obs.lstrip().startswith("<tool_response>Title: Orvo")
    assert reward == pytest.approx(-(0.1 + info["step_obs_tokens"] / 1000))
    obs, reward, *_, info = env.step('<tool_call>{"name": "follow", "arguments": {"link": "1"}}</tool_call>')
    assert info["url"] == BASE + "wiki/Ada.html"
    *_, info = env.step('<tool_call>{"name": "answer", "arguments": {"answer": "Ada Quell"}}</tool_call>')
    assert info["em"] == 1.0 and info["evidence_recall"] == 1.0


def test_cost_only_if_correct_and_partial_evidence(site):
    weights = RewardWeights(per_search=0.25, cost_only_if_correct=True)
    env = make_env(site, rewards=weights)
    env.reset(options={"task": TASKS[1]})
    assert env.step("<search>Orvo</search>")[1] == 0.0
    assert env.step(f"<open>{BASE}wiki/Orvo.html</open>")[1] == 0.0
    *_, info = env.step("<answer>Brask</answer>")
    charged = env.unwrapped.rubric.cost(info["reward_components"])
    assert charged == 0.5 and info["evidence_recall"] == 0.5  # Ada's page unread


def test_fictional_web_options_are_checked(tmp_path):
    with pytest.raises(ConfigError, match=r"unknown env option\(s\) \['top_kk'\]"):
        fictional_web(n_passages=300, site_dir=tmp_path / "s", top_kk=3)
    with pytest.raises(ConfigError, match="serve must be one of files, http"):
        fictional_web(n_passages=300, site_dir=tmp_path / "s", serve="ftp")


# -- the generated world's site ----------------------------------------------------------------
WORLD = {"n_passages": 300}


@pytest.fixture(scope="module")
def world_site(tmp_path_factory):
    return tmp_path_factory.mktemp("world") / "site"


def world_env(world_site, **kwargs):
    return searchgym.make("searchgym/FictionalQA-Web-v0", **WORLD, site_dir=world_site, **kwargs)


def test_registered_world_env_passes_the_checker(world_site):
    env = world_env(world_site)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*different from the unwrapped.*")
        check_env(env.unwrapped)
    assert json.loads((world_site / "site.json").read_text())["title"] == "Fictopedia"


def test_oracle_browses_to_the_answer(world_site):
    env = world_env(world_site, hops=3)
    task = env.unwrapped.tasks[0]
    (episode,) = run_episodes(lambda: world_env(world_site, hops=3), lambda: make_agent("oracle"), [task])
    tools = [t.tool for t in episode.turns]
    assert tools == ["search", "open", "follow", "follow", "answer"]
    chain = task.metadata["chain"]
    first = episode.turns[0].action
    assert f"<search> {chain[0]['entity']} </search>" in first
    page = episode.turns[2].observation  # the second entity's page, reached by a link
    assert f"Title: {chain[1]['entity']} – Fictopedia" in page
    assert episode.em == 1.0 and episode.evidence_recall == 1.0


@pytest.mark.parametrize("protocol", ["tags", "tool_calls"])
def test_oracle_solves_the_web_tasks_of_every_hop_count(world_site, protocol):
    tasks = [t for h in range(1, 5) for t in world_env(world_site, hops=h).unwrapped.tasks[:30]]
    episodes = run_episodes(
        lambda: world_env(world_site, protocol=protocol), lambda: make_agent("oracle"), tasks, n_envs=2
    )
    assert len(episodes) == 120
    assert summarize(episodes)["em"] >= 0.99
    for hops, metrics in summarize_by(episodes, "hops").items():
        assert metrics["em"] >= 0.99 and metrics["evidence_recall"] == 1.0, hops
        assert metrics["turns"] == hops + 2  # search, open, a follow per further hop, answer


def test_heuristic_answers_from_the_top_search_result(world_site):
    tasks = world_env(world_site, hops=1).unwrapped.tasks[:40]
    episodes = run_episodes(lambda: world_env(world_site), lambda: make_agent("heuristic"), tasks)
    assert all([t.tool for t in ep.turns] == ["search", "answer"] for ep in episodes)
    assert summarize(episodes)["em"] >= 0.3  # 0.6 on 200 tasks: it reads the top snippet only


def test_served_over_loopback_http(world_site):
    env = world_env(world_site, serve="http")
    tasks = env.unwrapped.tasks[:8]
    assert env.unwrapped.evidence_urls[tasks[0].evidence[0]].startswith("http://127.0.0.1:")
    episodes = run_episodes(lambda: world_env(world_site, serve="http"), lambda: make_agent("oracle"), tasks)
    assert summarize(episodes)["em"] == 1.0
    env.close()


def test_cli_eval_runs_the_oracle_on_the_web(world_site, capsys, tmp_path):
    argv = ["eval", "--env", "searchgym/FictionalQA-Web-v0", "--agent", "oracle", "--n", "20", "--json"]
    argv += ["--no-progress", "--out", str(tmp_path), "-E", "n_passages=300", "-E", f"site_dir={world_site}"]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["agents"]["oracle"]["all"]["em"] == 1.0


def test_miniwiki_site_and_oracle(tmp_path, monkeypatch):
    from test_backends import miniwiki_paragraphs

    from searchgym.tasks.miniwiki import miniwiki_path

    path = miniwiki_path(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in miniwiki_paragraphs()), encoding="utf-8")
    monkeypatch.setenv("SEARCHGYM_DATA", str(tmp_path))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    env = searchgym.make("searchgym/MiniWiki-Web-v0", split="train")
    tasks = env.unwrapped.tasks
    episodes = run_episodes(
        lambda: searchgym.make("searchgym/MiniWiki-Web-v0", split="train"),
        lambda: make_agent("oracle"),
        tasks,
    )
    assert len(episodes) >= 20 and summarize(episodes)["em"] == 1.0
    assert summarize(episodes)["evidence_recall"] == 1.0
    (site,) = (tmp_path / "cache" / "searchgym" / "sites").iterdir()
    assert site.name.startswith("miniwiki-") and (site / "site.json").is_file()
    assert env.unwrapped.evidence_urls[tasks[0].evidence[0]].startswith(
        "https://mini-wikipedia.example/wiki/"
    )
