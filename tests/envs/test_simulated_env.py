"""``searchgym/FictionalQA-Simulated-v0``: the generated world searched through a search engine
that a `TextGenerator` simulates (ZeroSearch), with a scripted generator in place of a model."""

from __future__ import annotations

import threading

import gymnasium as gym
import pytest

import searchgym
from searchgym.agents import OracleAgent, run_episodes, summarize
from searchgym.errors import ConfigError
from searchgym.generation import Completion
from searchgym.retrievers.simulated import NoiseCurriculum, Simulated, WritingProgress

ENV_ID = "searchgym/FictionalQA-Simulated-v0"
SMALL_WORLD = {"n_passages": 300}


class ScriptedSimulator:
    """Writes two documents per prompt, the first repeating the gold answer the prompt shows;
    records the prompts. Holds a lock, as real clients do, so it cannot be deep-copied."""

    def __init__(self) -> None:
        self.prompts: list[str] = []
        self.lock = threading.Lock()

    def chat(self, conversations, params):
        prompts = [conv[-1]["content"] for conv in conversations]
        self.prompts.extend(prompts)
        replies = []
        for prompt in prompts:
            answer = prompt.split("The correct answer is: ", 1)[1].split("\n", 1)[0]
            query = prompt.rsplit("Query: ", 1)[1]
            replies.append(
                f"Doc 1 (Title: Found): The answer is {answer}.\nDoc 2 (Title: Other): More on {query}."
            )
        return [Completion(text=r) for r in replies]


def test_without_a_generator_the_error_says_how_to_pass_one():
    with pytest.raises(ConfigError, match=r"searchgym.make\(id, generator=policy\).*--simulator hf:"):
        searchgym.make(ENV_ID, **SMALL_WORLD)


def test_oracle_episodes_read_simulated_documents_in_context():
    simulator = ScriptedSimulator()
    env = searchgym.make(ENV_ID, generator=simulator, **SMALL_WORLD)
    tasks = env.unwrapped.tasks[:6]
    episodes = run_episodes(lambda: env, OracleAgent, tasks)
    metrics = summarize(episodes)
    assert metrics["em"] == 1.0 and metrics["invalid_rate"] == 0.0
    assert metrics["searches"] == pytest.approx(sum(len(t.metadata["chain"]) for t in tasks) / len(tasks))
    assert len(simulator.prompts) == sum(ep.n_searches for ep in episodes)
    first = episodes[0]
    assert first.question in simulator.prompts[0] and first.answers[0] in simulator.prompts[0]
    assert f"The answer is {first.answers[0]}" in first.turns[0].observation
    assert "Doc 2(Title: Other)" in first.turns[0].observation


def test_spec_shares_the_generator_so_the_env_can_be_made_again():
    simulator = ScriptedSimulator()  # its lock makes a deep copy fail
    env = gym.make(ENV_ID, generator=simulator, **SMALL_WORLD)
    assert env.spec.kwargs["generator"] is simulator
    again = gym.make(env.spec)
    assert again.unwrapped.retriever.generator is simulator
    assert again.unwrapped.retriever is not env.unwrapped.retriever
    env.close(), again.close()


def test_simulator_settings_from_mappings_keep_the_other_defaults():
    env = searchgym.make(
        ENV_ID,
        generator=ScriptedSimulator(),
        noise={"total_steps": 100},
        simulator_params={"max_new_tokens": 32},
        k_docs=3,
        top_k=2,
        **SMALL_WORLD,
    )
    retriever = env.unwrapped.retriever
    assert isinstance(retriever, Simulated) and retriever.k_docs == 3 and env.unwrapped.top_k == 2
    assert retriever.noise == NoiseCurriculum(total_steps=100)
    assert retriever.noise_probability == 0.0  # step 0 until a trainer calls set_step
    assert retriever.params.max_new_tokens == 32 and retriever.params.temperature == 0.0
    retriever.set_step(100)
    assert retriever.noise_probability == 0.5


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"noise": {"total_step": 3}}, r"unknown noise curriculum field\(s\) \['total_step'\]"),
        ({"simulator_params": {"max_tokens": 3}}, r"unknown simulator_params field\(s\) \['max_tokens'\]"),
        ({"top_kk": 2}, r"unknown env option\(s\) \['top_kk'\]"),
        ({"cache": "x.sqlite"}, "give the cache a namespace"),
    ],
)
def test_bad_settings_are_config_errors(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        searchgym.make(ENV_ID, generator=ScriptedSimulator(), **kwargs, **SMALL_WORLD)


def test_close_closes_the_simulator_cache(tmp_path):
    path = tmp_path / "sim.sqlite"
    env = searchgym.make(
        ENV_ID, generator=ScriptedSimulator(), cache=path, namespace="scripted", **SMALL_WORLD
    )
    env.reset(seed=0)
    env.step("<search> anything </search>")
    env.close()
    env.close()  # idempotent
    other = ScriptedSimulator()
    again = searchgym.make(ENV_ID, generator=other, cache=path, namespace="scripted", **SMALL_WORLD)
    again.reset(seed=0)
    again.step("<search> anything </search>")
    assert other.prompts == []  # answered from the cache the first env wrote


def test_writing_progress_shows_a_bar_while_the_simulator_writes(capsys):
    """Wrapped in `WritingProgress` (as ``searchgym eval`` wraps --simulator), each search's
    generation shows a labelled bar on stderr, cleared when it ends; the documents are the same."""
    plain, shown = ScriptedSimulator(), ScriptedSimulator()
    envs = [searchgym.make(ENV_ID, generator=g, **SMALL_WORLD) for g in (plain, WritingProgress(shown))]
    observations = []
    for env in envs:
        env.reset(seed=0)
        observations.append(env.step("<search> who wrote it </search>")[0])
        env.close()
    err = capsys.readouterr().err
    assert observations[0] == observations[1] and plain.prompts == shown.prompts
    assert err.count("simulator writing documents:   0%") == 1  # one search, one bar
    assert err.rsplit("\r", 2)[1].strip() == ""  # cleared when done (leave=False)


def test_the_episode_bar_counts_every_turn_of_a_simulated_search(capsys):
    """The turn counter moves at each turn, before the turn's documents are written."""
    simulator = ScriptedSimulator()
    env = searchgym.make(ENV_ID, generator=simulator, **SMALL_WORLD)
    turns, written_before = [], []

    def on_turn(acted):
        turns.append(acted)
        written_before.append(len(simulator.prompts))

    tasks = env.unwrapped.tasks[:1]
    (episode,) = run_episodes(lambda: env, OracleAgent, tasks, on_turn=on_turn)
    assert turns == [1] * episode.n_turns and episode.n_searches >= 1
    assert written_before == list(range(episode.n_turns))  # the oracle searches, then answers


def test_writing_progress_needs_a_generator():
    with pytest.raises(ConfigError, match="chat"):
        WritingProgress(object())
