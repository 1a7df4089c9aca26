"""Hostile actions never crash an episode: every registered id, both protocols, Hypothesis-made
actions (deep nesting, huge numbers, lone surrogates, NULs, control characters, 1 MB of text,
thousands of calls in one turn). A bad action is an invalid step, never an exception, and every
observation is text a tokenizer takes (it encodes as UTF-8).

Envs are made as in test_registry.py: a small world, the tiny random models, fake benchmark
files, so every id can be made offline (an id whose runtime is missing, Lucene without a JDK, is
skipped with the reason); the simulated search engine is the tiny random Llama behind `HFPolicy`,
so the query reaches a real tokenizer. ``bench/fuzz.py`` runs a million actions."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from test_backends import tiny_simulator  # noqa: F401 (a fixture)
from test_registry import data_dir, small_kwargs  # noqa: F401 (data_dir is a fixture)

import searchgym
from searchgym.envs.registry import env_takes

TOOLS = ("search", "answer", "open", "follow", "find", "finish", "think", "information", "tool_call")
# text an agent should never write: lone surrogates, NULs, control and format characters
HOSTILE_CHARS = st.characters(categories=["Cs", "Cc", "Cf", "Zl", "Zp", "Co", "Lo", "Nd", "Po"])
HOSTILE_TEXT = st.text(HOSTILE_CHARS, max_size=40) | st.text(max_size=40)


@st.composite
def huge(draw) -> str:
    """Text far over every limit: 1 MB of one fragment, or deep nesting of brackets or tags."""
    unit = draw(st.sampled_from(["x", "\x00", "\udc80", "[", "{", "<search>", "9", "é"]))
    size = draw(st.sampled_from([1_000, 20_001, 1 << 20]))
    if unit in "[{":
        close = "]" if unit == "[" else "}"
        return unit * size + close * size
    return unit * (size // len(unit))


def json_values():
    scalars = (
        st.none()
        | st.booleans()
        | st.floats(allow_nan=True, allow_infinity=True)
        | st.integers()
        | HOSTILE_TEXT
        | st.sampled_from(TOOLS)
    )
    return st.recursive(
        scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(HOSTILE_TEXT, inner, max_size=4)
    )


@st.composite
def tool_call_body(draw) -> str:
    kind = draw(st.sampled_from(["call", "value", "nested", "number", "raw"]))
    if kind == "call":
        args = draw(
            st.dictionaries(st.sampled_from(["query", "answer", "url", "link", "text", "x"]), json_values())
        )
        payload = {"name": draw(st.sampled_from(TOOLS) | HOSTILE_TEXT), "arguments": args}
        if draw(st.booleans()):
            payload["arguments"] = json.dumps(args)  # OpenAI style: arguments as a JSON string
        return json.dumps(payload, ensure_ascii=draw(st.booleans()))
    if kind == "value":
        return json.dumps(draw(json_values()))
    if kind == "nested":
        depth = draw(st.integers(500, 100_000))
        return '{"name": "search", "arguments": ' + "[" * depth + "]" * depth + "}"
    if kind == "number":
        return '{"name": "search", "arguments": {"query": ' + "9" * draw(st.integers(4_000, 50_000)) + "}}"
    return draw(HOSTILE_TEXT)


@st.composite
def actions(draw) -> str:
    kind = draw(st.sampled_from(["tag", "tool_call", "many", "huge", "text"]))
    if kind == "tag":
        tag, inner = draw(st.sampled_from(TOOLS)), draw(HOSTILE_TEXT | huge())
        return f"<{tag}>{inner}</{tag}>" if draw(st.booleans()) else f"<{tag}>{inner}"
    if kind == "tool_call":
        return f"<tool_call>{draw(tool_call_body())}</tool_call>"
    if kind == "many":
        call = draw(st.sampled_from(["<search> x </search>", '<tool_call>{"name": "search"}</tool_call>']))
        return call * draw(st.integers(2, 5_000))
    if kind == "huge":
        return draw(huge())
    return draw(HOSTILE_TEXT)


# what an OpenAI-compatible server's JSON "\ud800" or a model's stray bytes hand the env
TEXT_NO_BACKEND_TAKES = [
    "<search>capital\ud800 of Orvanta</search>",
    "<search>\udc80</search>",
    "<search>capital\x00founder</search>",
    '<tool_call>{"name": "search", "arguments": {"query": "\\ud800 Orvanta"}}</tool_call>',
    "<answer>\ud800</answer>",
]


def fuzz_kwargs(request, env_id: str, tmp_path) -> dict:
    """`small_kwargs`, with the tiny Llama in place of the scripted simulator."""
    kwargs = dict(small_kwargs(request, env_id, tmp_path))  # a copy: it may be a shared dict
    if "generator" in kwargs and env_id.endswith("-Simulated-v0"):
        kwargs["generator"] = request.getfixturevalue("tiny_simulator")
        kwargs["simulator_params"] = {"max_new_tokens": 8}
    return kwargs


def _takes_protocol(env_id: str) -> bool:
    return env_takes(env_id, "protocol")


@pytest.mark.parametrize("protocol", ["tags", "tool_calls"])
@pytest.mark.parametrize("env_id", searchgym.list_ids())
def test_hostile_actions_are_invalid_steps_never_exceptions(request, env_id, protocol, data_dir, tmp_path):  # noqa: F811
    kwargs = fuzz_kwargs(request, env_id, tmp_path)
    if _takes_protocol(env_id):
        kwargs["protocol"] = protocol
    elif protocol != "tags":
        pytest.skip(f"{env_id} takes no protocol: it speaks tags only")
    env = searchgym.make(env_id, **kwargs)
    env.reset(seed=0)

    @settings(max_examples=12, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(action=actions())
    def step(action: str) -> None:
        obs, reward, terminated, truncated, info = env.step(action)
        assert isinstance(obs, str) and isinstance(info, dict)
        obs.encode("utf-8")  # the agent's tokenizer reads it next
        if terminated or truncated:
            env.reset()

    for action in TEXT_NO_BACKEND_TAKES:
        step = example(action=action)(step)

    try:
        step()
    finally:
        env.close()


@pytest.mark.parametrize(
    "action",
    [
        "<tool_call>" + "[" * 1000 + "]" * 1000 + "</tool_call>",
        '<tool_call>{"name": "search", "arguments": {"query": ' + "1" * 5000 + "}}</tool_call>",
        '<tool_call>{"name": "search", "arguments": "' + "[" * 3000 + '"}</tool_call>',
    ],
    ids=["nested", "huge-int", "nested-arguments-string"],
)
def test_the_reported_tool_call_crashes_are_invalid_steps(action):
    env = searchgym.make("searchgym/FictionalQA-BM25-v0", protocol="tool_calls", n_passages=300)
    env.reset(seed=0)
    _, _, _, _, info = env.step(action)
    assert info["n_invalid"] == 1 and "not valid JSON" in info["error"]


@pytest.mark.parametrize("serve", ["files", "http"])
@pytest.mark.parametrize(
    "url", ["https://fictopedia.example/" + "x" * 300, "https://fictopedia.example/\udc80"]
)
def test_urls_the_file_system_or_http_refuse_are_observations(serve, url):
    env = searchgym.make("searchgym/FictionalQA-Web-v0", serve=serve, n_passages=300)
    env.reset(seed=0)
    obs, _, terminated, _, info = env.step(f"<open> {url} </open>")
    env.close()
    assert not terminated and info["n_errors"] == 1 and "Could not open" in obs


@pytest.mark.slow
def test_the_fuzz_bench_runs_every_registered_id(tmp_path):
    """bench/fuzz.py makes every registered id offline and reports each: its steps, failures per
    million and slowest step, or why it was skipped (a missing runtime)."""
    ids = searchgym.list_ids()
    script = Path(__file__).resolve().parents[2] / "bench" / "fuzz.py"
    run = subprocess.run(
        [sys.executable, str(script), "--steps", str(4 * len(ids)), "--work", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "failures per million steps: 0.0 (0 failures)" in run.stdout
    rows = dict(
        re.findall(r"^(searchgym/\S+)\s+(\d+\s+0\s+0\.0\s+[\d.]+\s+[\d.]+|skipped: .+)", run.stdout, re.M)
    )
    assert sorted(rows) == sorted(ids), run.stdout
