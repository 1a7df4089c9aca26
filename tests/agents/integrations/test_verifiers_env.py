"""The verifiers adapter: verifiers' own loader and eval (in the side venv .venv-verifiers) play
the searchgym taskset to exactly the native ``searchgym eval`` figures, and the parts both of
verifiers' conventions share (tasks, tools, reward weights) behave as the env does."""

from __future__ import annotations

import functools
import importlib.util
import json
from pathlib import Path
from statistics import fmean

import pytest
from doc_blocks import doc_block
from side_venvs import run_in
from user_env import write_module

import searchgym
from searchgym.agents import make_agent, run_episodes, summarize
from searchgym.agents.integrations.verifiers.shared import DEFAULT_ENV, env_tasks, play, reward_weights
from searchgym.agents.play.rollout import sample_tasks
from searchgym.agents.play.session import ANSWERED, EPISODE_OVER, TURN_LIMIT, EnvSession
from searchgym.errors import DependencyNotInstalled

SIDE = Path(__file__).with_name("verifiers_side.py")
SIDE03 = Path(__file__).with_name("verifiers03_side.py")
PAGE = "trainers/verifiers.md"
FIGURES = ("n", "em", "f1", "cover_em", "searches", "turns", "invalid_rate", "truncated", "return")
# the tool_calls run also weighs format, charges searches and observation tokens and adds an
# episode term, so that every kind of reward component crosses over with its weight
REWARDS = {"format": 0.2, "per_search": 0.05, "per_1k_obs_tokens": 0.1, "terms": {"evidence_recall": 0.5}}
PROTOCOLS = {"tags": {"protocol": "tags"}, "tool_calls": {"protocol": "tool_calls", "rewards": REWARDS}}


def native(options: dict, agent: str, n: int = 200) -> dict:
    """What ``searchgym eval --agent AGENT --n N --seed 0 -E ...`` reports, in process."""
    env = searchgym.make(DEFAULT_ENV, **options)
    tasks = sample_tasks(env.unwrapped.tasks, n, 0)
    episodes = run_episodes(
        lambda: searchgym.make(DEFAULT_ENV, **options),
        functools.partial(make_agent, agent, seed=0),
        tasks,
        n_envs=4,
    )
    names = reward_weights(env)
    return {
        **{k: summarize(episodes)[k] for k in FIGURES},
        "components": {name: fmean(ep.reward_components.get(name, 0.0) for ep in episodes) for name in names},
        "weights": names,
        "task_ids": sorted(ep.task_id for ep in episodes),
    }


@pytest.mark.slow
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_verifiers_eval_gives_the_native_figures(protocol):
    options = PROTOCOLS[protocol]
    runs = [
        {"name": agent, "agent": agent, "options": options, "n": 200} for agent in ("oracle", "heuristic")
    ]
    if protocol == "tags":  # the faults, on two tasks, in the same eval
        runs.append({"name": "faulty", "agent": "faulty", "options": {**options, "max_turns": 5}, "n": 2})
    report = run_in("verifiers", SIDE, "v1", json.dumps(runs))
    for agent in ("oracle", "heuristic"):
        want, got = native(options, agent), report[agent]
        assert sorted(got["task_ids"]) == want["task_ids"]
        for key in FIGURES:
            assert got[key] == pytest.approx(want[key], rel=1e-12, abs=1e-12), (agent, key)
        assert got["weights"] == want["weights"]  # each component under its name, with the env's weight
        assert got["components"] == pytest.approx(want["components"], rel=1e-12, abs=1e-12)
        assert got["reward"] == pytest.approx(want["return"], rel=1e-12, abs=1e-12)  # the trace's reward
        assert got["metrics"] == pytest.approx({k: want[k] for k in ("em", "f1", "searches")})
    assert report["heuristic"]["em"] < report["oracle"]["em"] == 1.0
    if protocol == "tool_calls":
        assert (
            report["oracle"]["components"]["search_calls"] > 0
            and report["oracle"]["components"]["evidence_recall"] > 0
        )
    else:
        check_faults(report)


def check_faults(report: dict) -> None:
    """An empty query is the env's invalid action (its error observation, counted); an argument
    the tool lacks and a tool the env lacks are refused before the env (no turn spent); the
    env's turn limit (5) ends the episode and the harness stops asking the model."""
    faulty = report["faulty"]
    assert faulty["n"] == 2 and faulty["truncated"] == 1.0 and faulty["turns"] == 5
    assert faulty["invalid_rate"] == pytest.approx(1 / 5) and faulty["searches"] == 4 and faulty["em"] == 0
    conversations = report["faulty_requests"]
    assert len(conversations) == 2 * 7  # per task: 5 played turns + 2 refused calls, none after the limit
    last = max(conversations, key=len)
    results = [m["content"] for m in last if m["role"] == "tool"]
    session = EnvSession(DEFAULT_ENV, protocol="tags")
    session.reset(task=session.tasks[0])
    assert results[0] == play(session, "search", {"query": ""})  # the env's own error observation
    assert "search needs a non-empty 'query'" in results[0]
    assert "q" in results[1] and "query" in results[1] and "required" in results[1].lower()
    assert results[2] == "error: unknown tool 'open'; the tools are ['answer', 'search']"
    # the fifth search hit the limit: the harness stopped, so no request carries its result
    assert len(results) == 6 and not any(TURN_LIMIT in r for r in results)


@pytest.mark.slow
def test_verifiers03_load_environment_gives_the_native_figures():
    """verifiers 0.3's own loader (``load_environment("searchgym", ...)``) and its own eval play the
    200 dev tasks of both protocols to the native figures; the rubric's functions are the env's
    reward components with its weights (then searchgym's metrics and verifiers' num_turns, weight 0)."""
    runs = [
        {"name": f"{protocol}/{agent}", "agent": agent, "options": options, "n": 200}
        for protocol, options in PROTOCOLS.items()
        for agent in ("oracle", "heuristic")
    ]
    faults = {"protocol": "tags", "max_turns": 5}
    runs += [{"name": name, "agent": name, "options": faults, "n": 2} for name in ("faulty", "silent")]
    report = run_in("verifiers03", SIDE03, "eval", json.dumps(runs))
    for protocol, options in PROTOCOLS.items():
        for agent in ("oracle", "heuristic"):
            want, got = native(options, agent), report[f"{protocol}/{agent}"]
            assert sorted(got["task_ids"]) == want["task_ids"]
            for key in FIGURES:
                assert got[key] == pytest.approx(want[key], rel=1e-12, abs=1e-12), (protocol, agent, key)
            extra = {"em": 0.0, "f1": 0.0, "searches": 0.0, "num_turns": 0.0}
            assert got["weights"] == {**want["weights"], **extra}
            components = {k: v for k, v in got["components"].items() if k in want["weights"]}
            assert components == pytest.approx(want["components"], rel=1e-12, abs=1e-12)
            assert got["reward"] == pytest.approx(want["return"], rel=1e-12, abs=1e-12)
            assert [got["components"][k] for k in ("em", "f1", "searches")] == pytest.approx(
                [want[k] for k in ("em", "f1", "searches")]
            )
            assert got["stop_conditions"] == ["has_final_env_response"]  # the env's episode ended it
        assert report[f"{protocol}/heuristic"]["em"] < report[f"{protocol}/oracle"]["em"] == 1.0
    oracle = report["tool_calls/oracle"]["components"]
    assert oracle["search_calls"] > 0 and oracle["evidence_recall"] > 0
    check_faults03(report)


def check_faults03(report: dict) -> None:
    """An empty query is the env's invalid action (its error observation); an argument the tool
    lacks and a tool the env lacks are the model's errors, shown to it (no turn spent); the env's
    turn limit (5) ends the rollout, its last observation closing the completion; a reply without
    a tool call ends the rollout with nothing earned."""
    faulty = report["faulty"]
    assert faulty["n"] == 2 and faulty["truncated"] == 1.0 and faulty["turns"] == 5
    assert faulty["invalid_rate"] == pytest.approx(1 / 5) and faulty["searches"] == 4 and faulty["em"] == 0
    assert faulty["stop_conditions"] == ["has_final_env_response"]
    assert all(m.endswith(TURN_LIMIT) for m in faulty["last_messages"])
    conversations = report["faulty_requests"]
    assert len(conversations) == 2 * 7  # per task: 5 played turns + 2 refused calls, none after the limit
    results = [m["content"] for m in max(conversations, key=len) if m["role"] == "tool"]
    session = EnvSession(DEFAULT_ENV, protocol="tags", max_turns=5)
    session.reset(task=session.tasks[0])
    assert results[0] == play(session, "search", {"query": ""})  # the env's own error observation
    assert "search needs a non-empty 'query'" in results[0]
    assert results[1] == "error: search takes exactly the string argument(s) ['query'], got {'q': 'x'}"
    assert results[2] == f"error: unknown tool 'open'; the tools of {DEFAULT_ENV} are ['search', 'answer']"
    assert len(results) == 6 and not any(TURN_LIMIT in r for r in results)
    silent = report["silent"]
    assert silent["stop_conditions"] == ["no_tool_call"] and silent["turns"] == 0
    assert silent["reward"] == 0 and silent["components"]["num_turns"] == 1


@pytest.mark.slow
def test_docs_page_verifiers03_section_runs():
    """docs/trainers/verifiers.md, its verifiers 0.3 section: the vf-eval command (bash block 1) and
    the Python example (python block 1), in .venv-verifiers03 against the scripted server."""
    report = run_in("verifiers03", SIDE03, "doc", doc_block(PAGE, "bash", 1), doc_block(PAGE, "python", 1))
    assert report["eval"]["n"] == 20 and report["eval"]["em"] == 1.0 and report["eval"]["reward"] == 1.0
    assert report["eval"]["metrics"] == [
        "em",
        "f1",
        "format",
        "num_turns",
        "obs_tokens_1k",
        "outcome",
        "search_calls",
        "searches",
    ]
    assert report["python"] == "SearchgymEnv 20 reward 1.0 em 1.0\n"


def test_reward_names_and_weights_are_the_envs_and_sum_to_its_reward():
    env = searchgym.make(DEFAULT_ENV, protocol="tool_calls", rewards=REWARDS)
    weights = reward_weights(env)
    costs = {"search_calls": -0.05, "obs_tokens_1k": -0.1}
    assert weights == {"outcome": 1.0, "format": 0.2, **costs, "evidence_recall": 0.5}
    [episode] = run_episodes(
        lambda: env, lambda: make_agent("oracle"), sample_tasks(env.unwrapped.tasks, 1, 0)
    )
    assert set(episode.reward_components) == set(weights)
    weighted = sum(weights[name] * value for name, value in episode.reward_components.items())
    assert weighted == pytest.approx(episode.total_reward) and episode.reward_components["search_calls"] > 0


def test_tasks_are_the_ones_eval_plays_with_the_envs_first_observation():
    session = EnvSession(DEFAULT_ENV, protocol="tags")
    rows = env_tasks(session, 5, seed=3)
    assert [r.task for r in rows] == sample_tasks(session.tasks, 5, 3)
    assert [r.seed for r in rows] == [3, 4, 5, 6, 7]
    first, _ = session.reset(task=rows[2].task)
    assert rows[2].prompt == first and rows[2].task.question in first
    assert len(env_tasks(session)) == len(session.tasks)


def test_a_tool_call_plays_the_env_errors_and_limits_included():
    session = EnvSession(DEFAULT_ENV, protocol="tool_calls", max_turns=2)
    task = session.tasks[0]
    session.reset(task=task)
    error = play(session, "search", {"query": " "})  # an invalid action: the env's own error observation
    assert error.startswith("Error: search needs a non-empty 'query'") and "tool_response" not in error
    assert session.episode.n_invalid == 1 and not session.done
    with pytest.raises(ValueError, match=r"search takes exactly the string argument\(s\) \['query'\]"):
        play(session, "search", {"q": "x"})  # the caller's error: nothing played
    with pytest.raises(ValueError, match=r"unknown tool 'open'; the tools of .* are \['search', 'answer'\]"):
        play(session, "open", {"url": "x"})
    assert play(session, "search", {"query": task.question}).endswith(TURN_LIMIT)
    assert session.episode.truncated and session.episode.n_turns == 2
    assert (
        play(session, "answer", {"answer": task.answers[0]}) == EPISODE_OVER and session.episode.n_turns == 2
    )
    session.reset(task=task)
    assert play(session, "answer", {"answer": task.answers[0]}) == ANSWERED and session.episode.em == 1.0


def test_without_verifiers_the_error_names_the_extra():
    if importlib.util.find_spec("verifiers") is not None:
        pytest.skip("verifiers is installed in this venv")
    with pytest.raises(DependencyNotInstalled, match=r'pip install "searchgym\[verifiers\]"'):
        searchgym.SearchgymTaskset  # noqa: B018  (resolved lazily)
    with pytest.raises(
        DependencyNotInstalled, match=r'pip install "searchgym\[verifiers\]".* "verifiers>=0.3,<0.4"'
    ):
        searchgym.load_environment(options={"protocol": "tags"})
    assert "load_environment" in searchgym.__all__


@pytest.mark.slow
def test_each_convention_refuses_the_other_verifiers():
    """verifiers 0.4 gets no load_environment env, verifiers 0.3 no taskset: each error says what to use."""
    v04 = run_in("verifiers", SIDE03, "refused", "load_environment")
    assert v04["error"] == "DependencyNotInstalled" and "found 0.4" in v04["message"]
    assert "use the searchgym taskset (vf-eval searchgym" in v04["message"]
    v03 = run_in("verifiers03", SIDE03, "refused", "SearchgymTaskset")
    assert v03["error"] == "DependencyNotInstalled" and "needs verifiers >= 0.4" in v03["message"]
    assert "SearchgymTaskset" not in searchgym.__all__  # `from searchgym import *` works without it
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        searchgym.nope  # noqa: B018


@pytest.mark.slow
def test_docs_page_runs():
    """docs/trainers/verifiers.md: its vf-eval command (bash block 0) against a scripted
    OpenAI-compatible server, and its Python example (python block 0)."""
    report = run_in("verifiers", SIDE, "doc", doc_block(PAGE, "bash", 0), doc_block(PAGE, "python", 0))
    assert report["eval"]["n"] == 20 and report["eval"]["em"] == 1.0 and report["eval"]["reward"] == 1.0
    weights = {"format": 0.0, "obs_tokens_1k": 0.0, "outcome": 1.0, "search_calls": 0.0}
    assert report["eval"]["weights"] == weights
    name, question = report["python"].splitlines()[0].split(" | ")
    assert name == "SearchgymTaskset" and question.startswith("Question: ")
    assert report["python"].splitlines()[1] == str(dict(sorted(weights.items())))


@pytest.mark.slow
def test_vf_eval_plays_a_users_own_envs_named_by_id(user_site, tmp_path):
    """vf-eval plays the oracle on a plug-in package's env named by its id alone, and on a plain
    module's env named with --env.taskset.imports (found in vf-eval's directory, also by the tool
    server, which runs elsewhere); an id nothing registers names the flag and the entry-point group."""
    write_module(tmp_path)
    report = run_in("verifiers", SIDE, "user", str(user_site), str(tmp_path))
    assert sorted(report["plugin"]["task_ids"]) == ["q0", "q1"] and report["module"]["task_ids"] == ["q1"]
    for run in ("plugin", "module"):
        assert report[run]["em"] == 1.0 and report[run]["searches"] == 1.0 and report[run]["reward"] == 1.0
    unknown = report["unknown"]
    assert unknown["returncode"] != 0
    assert unknown["stderr"].splitlines()[-1] == (
        "searchgym.errors.ConfigError: no environment 'mylab/Nope-v0' is registered. Did you mean "
        "'mylab/History-v0', 'mylab/Turing-v0'? `searchgym list` shows them all; an env of your own is "
        "registered by importing its module first (--env.taskset.imports MODULE) or by installing its "
        "package with an entry point in the 'searchgym.plugins' group (docs/plug-in.md)"
    )


@pytest.mark.slow
def test_verifiers03_loads_and_plays_a_users_own_envs_named_by_env(user_site, tmp_path):
    """verifiers 0.3's loader makes a plug-in package's env named by ``env`` alone and a plain
    module's env named with ``imports``, and its eval plays the oracle on each. ``env_id=`` is
    Python's TypeError inside verifiers' own ``load_environment(env_id, **env_args)`` (it names the
    module, searchgym); called directly, searchgym's says to write ``env=``."""
    write_module(tmp_path)
    report = run_in("verifiers03", SIDE03, "user", str(user_site), str(tmp_path))
    assert sorted(report["plugin"]["task_ids"]) == ["q0", "q1"] and report["module"]["task_ids"] == ["q1"]
    for run in ("plugin", "module"):
        assert report[run]["em"] == 1.0 and report[run]["searches"] == 1.0 and report[run]["reward"] == 1.0
    assert report["env_id"] == "TypeError: load_environment() got multiple values for argument 'env_id'"
    assert report["direct_env_id"] == (
        "ConfigError: name the env with env='mylab/History-v0', not env_id: verifiers' "
        "load_environment(env_id, **env_args) takes env_id as the module to load ('searchgym')"
    )
    assert report["unknown"].startswith("RuntimeError: Failed to load environment 'searchgym': no env")
    assert "(load_environment's imports: [MODULE])" in report["unknown"]
    assert "an entry point in the 'searchgym.plugins' group" in report["unknown"]
