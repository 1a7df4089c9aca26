"""A framework agent through the gateway: tests/agents/gateway/agents_sdk_agent.py, written with
the OpenAI Agents SDK (the real package), plays the env's tools (a scripted model writes its tool
calls: a random one never does), is evaluated and trained a few steps on the tiny Llama, and
talks to nothing but the gateway."""

import contextlib
import json
import math
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from scripted_policy import ScriptedPolicy
from transformers import AutoTokenizer

from searchgym.agents.gateway.server import Gateway
from searchgym.agents.play.programs import ProgramPlayer, load_program
from searchgym.agents.play.session import TURN_LIMIT, tool_message
from searchgym.agents.train.metrics_log import read_metrics
from searchgym.cli import main
from searchgym.envs.registry import make
from searchgym.generation import SamplingParams
from searchgym.registry import REWARDS, Spec

ROOT = Path(__file__).resolve().parents[3]


def _import_sdk():
    """The SDK's module is named ``agents``, as is this repository's agents/ folder (searchgym.agents):
    where the repository root is on sys.path (``python -m pytest`` run from it), import the SDK's
    first, so that the program's ``from agents import ...`` finds it."""
    saved = sys.path[:]
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT]
    try:
        import agents
    finally:
        sys.path[:] = saved
    return agents


sdk = _import_sdk()

ENV = "searchgym/FictionalQA-BM25-v0"
PROGRAM = f"{Path(__file__).with_name('agents_sdk_agent.py')}:run"
PARAMS = SamplingParams(max_new_tokens=64)
QUERY = "Jomis Britard employer"


LOCAL = {"127.0.0.1", "localhost", "::1"}
_outside: list | None = None
"""While `watch_network` watches: the connections and name lookups that left the machine."""


def _hear(event, args):
    if _outside is None:
        return
    if event == "socket.connect" and isinstance(args[1], tuple) and args[1][0] not in LOCAL:
        _outside.append((event, args[1]))
    elif event == "socket.getaddrinfo" and args[0] not in LOCAL and args[0] is not None:
        _outside.append((event, args[0]))


sys.addaudithook(_hear)  # it hears the sockets of every thread, the program's and the SDK's; once per process


@contextlib.contextmanager
def watch_network():
    global _outside
    _outside = seen = []
    try:
        yield seen
    finally:
        _outside = None


class TraceRecorder(sdk.TracingProcessor):
    """The SDK's traces, as its exporter to OpenAI's servers would get them."""

    def __init__(self):
        self.traces = []

    def on_trace_start(self, trace):
        self.traces.append(trace)

    def on_trace_end(self, trace): ...
    def on_span_start(self, span): ...
    def on_span_end(self, span): ...
    def shutdown(self): ...
    def force_flush(self): ...


@pytest.fixture(scope="module")
def tokenizer(tiny_llama_dir):
    return AutoTokenizer.from_pretrained(tiny_llama_dir)


def call(name, **arguments):
    """A tool call as the Hermes convention writes it."""
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def play(policy, env, task):
    """One episode of the program on ``task``, through a gateway in front of ``policy``; what left
    the machine meanwhile."""
    program = load_program(PROGRAM)
    with Gateway(policy, PARAMS) as gateway, watch_network() as outside:
        (episode,) = ProgramPlayer(program, gateway, time_limit_s=60).play([env], [task], PARAMS, seed=0)
    env.close()
    return episode, outside


@pytest.mark.parametrize("ending", ["answer tool", "final text"])
def test_the_models_tool_calls_reach_the_env_and_its_calls_merge_into_one_stream(tokenizer, ending):
    env = make(ENV, split="dev", n_passages=300)
    task = env.unwrapped.tasks[0]
    gold = task.answers[0]
    script = [
        f"Let me look.{call('search', query=QUERY)}",
        call("answer", answer=gold) if ending == "answer tool" else gold,
    ]
    policy = ScriptedPolicy(tokenizer, script, logprob=-0.5)
    traces = TraceRecorder()
    sdk.add_trace_processor(traces)
    episode, outside = play(policy, env, task)

    assert episode.error is None  # the program ran, and the gateway took every request the SDK sent
    assert [t.tool for t in episode.turns] == ["search", "answer"] and episode.turns[0].query == QUERY
    assert episode.prediction == gold and episode.em == 1.0 and episode.total_reward == 1.0
    assert policy.calls == 2  # the answer tool stops the run; a text reply is the final output
    # the second request (the assistant's tool call, the tool's result) continued the sampled tokens
    first, second = policy.prompts
    sampled = [tokenizer.encode(text, add_special_tokens=False) + [tokenizer.eos_token_id] for text in script]
    assert second[: len(first) + len(sampled[0])] == first + sampled[0]
    result = tool_message(env.unwrapped.protocol, episode.turns[0].observation, False, False)
    assert "Doc 1" in result and result in tokenizer.decode(second[len(first) + len(sampled[0]) :])
    (stream,) = episode.streams
    assert stream.prompt_ids == first and stream.ids[-len(sampled[1]) :] == sampled[1]
    assert stream.ids == second[len(first) :] + sampled[1]
    assert [i for i, m in zip(stream.ids, stream.mask) if m] == sampled[0] + sampled[1]
    assert {lp for lp, m in zip(stream.logprobs, stream.mask) if m} == {-0.5}
    assert outside == [] and traces.traces == []  # no tracing, nothing sent off the machine


def test_an_episode_the_envs_turn_limit_ends_is_scored_without_an_error(tokenizer):
    env = make(ENV, split="dev", n_passages=300, max_turns=2)
    task = env.unwrapped.tasks[0]
    script = [call("search", query="a"), call("search", query="b"), "Too late to answer."]
    policy = ScriptedPolicy(tokenizer, script, logprob=-0.5)
    episode, _ = play(policy, env, task)
    assert episode.error is None and episode.truncated and episode.prediction is None
    assert [t.query for t in episode.turns] == ["a", "b"] and policy.calls == 3  # it read the turn limit
    assert TURN_LIMIT in tokenizer.decode(policy.prompts[2]) and len(episode.streams) == 1


def test_searchgym_eval_plays_it_on_the_tiny_model(tiny_llama_dir, tmp_path):
    out = tmp_path / "eval"
    model = f"hf:{tiny_llama_dir}"
    argv = ["eval", "--program", PROGRAM, "--agent", model, "--n", "2", "--max-new-tokens", "16"]
    assert main([*argv, "-E", "n_passages=300", "--no-progress", "--out", str(out)]) == 0
    (saved,) = out.glob("*.jsonl")
    episodes = [json.loads(line) for line in saved.open()]
    # a random model writes no tool call: its reply is the SDK's final output, which the player answers
    assert len(episodes) == 2 and all(e["error"] is None and e["prediction"] for e in episodes)
    assert all([t["tool"] for t in e["turns"]] == ["answer"] for e in episodes)
    assert json.loads((out / "metrics.json").read_text())["agents"][PROGRAM]["all"]["n"] == 2


def answer_length(episode):
    """A reward term that differs between a random model's answers. The SDK agent on a random model
    never calls a tool (it answers with its first reply), so every episode's observation cost is 0
    and, without this term, all rewards would be equal: no advantage, no update."""
    return len(episode.prediction or "") / 100


def test_searchgym_train_changes_the_weights_and_logs_the_rewards(tiny_llama_dir, tmp_path, monkeypatch):
    monkeypatch.setitem(REWARDS._specs, "test-answer-length", Spec("test-answer-length", answer_length))
    run_dir = tmp_path / "run"
    config = {
        "model": str(tiny_llama_dir),
        "env": ENV,
        "env_kwargs": {"n_passages": 300, "max_obs_tokens": 300},
        "rewards": {"per_1k_obs_tokens": 1.0, "terms": {"test-answer-length": 1.0}},
        "run_dir": str(run_dir),
        "steps": 2,
        "tasks_per_step": 2,
        "group_size": 2,
        "max_turns": 2,
        "max_new_tokens": 8,
        "lr": 1e-3,
        "micro_batch_size": 3,
        "eval_tasks": 2,
        "checkpoint_every": 1,
        "keep_checkpoints": 3,
        "progress": False,
        "tensorboard": False,
    }
    path = tmp_path / "train.yaml"
    path.write_text(json.dumps(config))  # JSON is YAML
    assert main(["train", "--config", str(path), "--program", PROGRAM]) == 0

    steps = [row for row in read_metrics(run_dir) if "loss/policy" in row]
    assert [row["step"] for row in steps] == [1, 2]
    for row in steps:
        rewards = {k: v for k, v in row.items() if k.startswith("reward/")}
        logged = {"reward/total", "reward/outcome", "reward/obs_tokens_1k", "reward/test-answer-length"}
        assert logged <= set(rewards)
        assert all(math.isfinite(v) for v in rewards.values()) and row["rollout/response_tokens"] > 0
    saved = [json.loads(line) for line in (run_dir / "episodes" / "step-000002.jsonl").open()]
    assert len({row["total_reward"] for row in saved}) > 1  # the groups' rewards differ: advantages are not 0
    checkpoints = run_dir / "checkpoints"
    start, end = (load_file(checkpoints / f"step-{s:06d}" / "model.safetensors") for s in (0, 2))
    assert any(not torch.equal(start[k], end[k]) for k in start)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["eval_before"]["n"] == 2 and summary["eval_after"]["n"] == 2
