"""The skyrl-gym adapter: SkyRL's ``skyrl_gym.make(env_class, env_config=..., extras=...)`` makes a
searchgym env that plays exactly as ``searchgym eval`` does (the same episodes and figures for the
scripted agents on its 200 dev tasks), with the env's rewards, turn limit and observations."""

import functools
import json
import re
import shlex
from statistics import fmean

import pytest
import skyrl_gym
from doc_blocks import doc_block
from omegaconf import OmegaConf
from user_env import IMPORTED_ENV, IMPORTED_MODULE, PLUGIN_ENV

from searchgym.agents import make_agent, run_episodes, summarize
from searchgym.agents.integrations.skyrl import ENV_CLASS, SkyRLEnv, register_skyrl_env, skyrl_dataset
from searchgym.agents.play.rollout import sample_tasks
from searchgym.agents.play.session import agent_reset_info
from searchgym.envs.registry import make
from searchgym.errors import ConfigError

ENV_ID = "searchgym/FictionalQA-BM25-v0"
FIGURES = ("em", "f1", "cover_em", "searches", "turns", "truncated", "return")


@pytest.fixture(scope="module", autouse=True)
def registered():
    return register_skyrl_env()


def skyrl_make(extras, **env_kwargs):
    """The env as SkyRL's generator makes it: its config section as a DictConfig, the row's extras."""
    config = OmegaConf.create({"env_id": ENV_ID, "env_kwargs": env_kwargs})
    return skyrl_gym.make(ENV_CLASS, env_config=config, extras=extras)


def play(env, agent, prompt=None):
    """One episode as SkyRL's generator plays it: ``init``, then ``step`` until done."""
    chat, info = env.init(prompt)
    agent.reset(agent_reset_info(info))
    observation, outputs = chat[-1]["content"], []
    while True:
        out = env.step(agent.act(observation))
        outputs.append(out)
        if out["done"]:
            return outputs
        (message,) = out["observations"]
        observation = message["content"]


@pytest.mark.parametrize("protocol", ["tags", "tool_calls"])
def test_scripted_agents_give_the_native_eval_figures(protocol):
    tasks = sample_tasks(make(ENV_ID).unwrapped.tasks, 200, seed=0)
    rows = skyrl_dataset(ENV_ID, tasks, seed=0, protocol=protocol)
    for name in ("oracle", "heuristic"):
        native = run_episodes(
            lambda: make(ENV_ID, protocol=protocol),
            functools.partial(make_agent, name, seed=0),
            tasks,
            n_envs=4,
            seed=0,
        )
        agent, episodes, metrics = make_agent(name, seed=0), [], []
        for row in rows:
            env = skyrl_make({**row, "max_turns": 8}, protocol=protocol)  # SkyRL adds generator.max_turns
            play(env, agent, row["prompt"])
            episodes.append(env.episode)
            metrics.append(env.get_metrics())
            env.close()
        assert episodes == native, name  # every turn: actions, observations, rewards, components
        skyrl = SkyRLEnv.aggregate_metrics(metrics)  # how SkyRL averages env metrics
        expected = summarize(native)
        assert {k: skyrl[k] for k in FIGURES} == pytest.approx({k: expected[k] for k in FIGURES}, abs=1e-12)
        for term in native[0].reward_components:
            assert skyrl[f"reward/{term}"] == pytest.approx(
                fmean(ep.reward_components[term] for ep in native)
            )
    assert expected["em"] < 1 and skyrl["em"] == expected["em"]  # the heuristic misses some: not trivial


def test_steps_return_the_envs_reward_observation_and_info():
    task = make(ENV_ID).unwrapped.tasks[0]
    env = skyrl_make({"task": json.dumps(task.to_dict()), "data_source": "x"}, rewards={"per_search": 0.1})
    chat, info = env.init([])
    assert chat == [{"role": "user", "content": chat[0]["content"]}] and task.question in chat[0]["content"]
    assert info["task"] == task.to_dict() and info["protocol"] == "tags"
    out = env.step(f"<search> {task.question} </search>")
    assert out["reward"] == pytest.approx(-0.1) and not out["done"]
    assert out["observations"][0]["role"] == "user"
    assert out["observations"][0]["content"].lstrip().startswith("<information>Doc 1(Title: ")
    assert out["metadata"]["reward_components"]["search_calls"] == 1.0  # weight -0.1
    assert out["metadata"]["n_searches"] == 1 and out["metadata"]["doc_ids"][0] == task.evidence[0]
    out = env.step(f"<answer> {task.answers[0]} </answer>")
    assert out["done"] and out["observations"] == [] and out["reward"] == 1.0
    assert out["metadata"]["em"] == 1.0 and env.turns == 2
    assert env.get_metrics()["return"] == pytest.approx(0.9)
    with pytest.raises(RuntimeError, match="the episode is over"):
        env.step("<answer> again </answer>")


def test_skyrls_max_turns_is_the_turn_limit():
    env = skyrl_make({"task_id": make(ENV_ID).unwrapped.tasks[3].id, "max_turns": 1})
    env.init([{"role": "user", "content": "the row's prompt"}])
    out = env.step("<search> anything </search>")
    assert out["done"] and out["metadata"]["tool"] == "search" and env.episode.truncated
    assert env.max_turns == 1
    with pytest.raises(ConfigError, match=r"disagrees with SkyRL's generator.max_turns=4"):
        skyrl_make({"task_id": "x", "max_turns": 4}, max_turns=6)


def test_init_returns_the_rows_prompt_and_resets_the_rows_task_with_its_seed():
    rows = skyrl_dataset(ENV_ID, seed=7, protocol="tool_calls")
    row = rows[5]
    assert row["env_class"] == ENV_CLASS and row["seed"] == 12 and row["data_source"] == ENV_ID
    env = skyrl_make(row, protocol="tool_calls")
    chat, info = env.init(row["prompt"])
    assert chat == row["prompt"] and info["task_id"] == row["task_id"] and env.seed == 12
    assert "<tool_call>" in chat[0]["content"]


def test_configuration_errors_say_how_to_fix_them():
    with pytest.raises(ConfigError, match=r"takes only \['env_id', 'env_kwargs', 'imports'\], got \['proto"):
        skyrl_gym.make(ENV_CLASS, env_config={"protocol": "tags"}, extras={"task_id": "x"})
    with pytest.raises(ConfigError, match=r"needs a 'task' \(JSON\) or 'task_id' column; got columns"):
        skyrl_make({"data_source": "x"})
    with pytest.raises(ConfigError, match="is not one of the 800 tasks"):
        skyrl_make({"task_id": "no-such-task"})
    with pytest.raises(ConfigError, match="no environment 'searchgym/NoSuch-v0' is registered"):
        skyrl_gym.make(ENV_CLASS, env_config={"env_id": "searchgym/NoSuch-v0"}, extras={"task_id": "x"})
    assert register_skyrl_env() == ENV_CLASS  # again: a no-op
    with pytest.raises(ConfigError, match="already has an env 'search'"):
        register_skyrl_env("search")


def test_the_docs_example_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # it writes data/searchgym-skyrl/{train,dev}.parquet
    namespace = {}
    exec(doc_block("trainers/skyrl.md", "python", 0), namespace)
    assert namespace["metrics"]["em"] == 1.0 and namespace["metrics"]["searches"] >= 1
    assert (tmp_path / "data/searchgym-skyrl/train.parquet").is_file()


def test_the_docs_skyrl_command_configures_the_env():
    """The SkyRL launch command's env keys, read as Hydra reads them, make the env they describe."""
    command = doc_block("trainers/skyrl.md", "bash", 0)
    overrides = dict(
        arg.lstrip("+").split("=", 1) for arg in shlex.split(command.replace("\\\n", " ")) if "=" in arg
    )
    config = OmegaConf.from_dotlist([f"{k}={v}" for k, v in overrides.items()])
    assert config.environment.env_class == ENV_CLASS
    env_config = config.environment.skyrl_gym[ENV_CLASS]
    rows = skyrl_dataset(env_config.env_id, **OmegaConf.to_container(env_config.env_kwargs), split="train")
    env = skyrl_gym.make(
        ENV_CLASS, env_config=env_config, extras={**rows[0], "max_turns": config.generator.max_turns}
    )
    assert list(config.generator.sampling_params.stop) == list(env.session.protocol.stop)
    assert env.max_turns == config.generator.max_turns and env.session.env_id == env_config.env_id
    assert re.search(r"data.train_data=\S*train.parquet", command)


def test_a_users_own_envs_play_through_skyrls_config_alone(user_envs):
    """An env of an installed package (an entry point in ``searchgym.plugins``) and one of a plain
    module named by the config's ``imports``, each made by skyrl-gym from SkyRL's config in a
    process that imported neither, play an episode of the oracle."""
    for env_id, imports in ((PLUGIN_ENV, None), (IMPORTED_ENV, [IMPORTED_MODULE])):
        config = OmegaConf.create({"env_id": env_id, **({"imports": imports} if imports else {})})
        env = skyrl_gym.make(ENV_CLASS, env_config=config, extras={"task_id": "q1", "max_turns": 4})
        play(env, make_agent("oracle"))
        assert env.get_metrics()["em"] == 1.0 and env.episode.n_searches == 1, env_id
    key = r"environment\.skyrl_gym\.searchgym\.imports"
    unknown = rf"no environment 'mylab/Nope-v0' is registered\. .*\({key}: \[MODULE\]\) .*'searchgym.plugins'"
    with pytest.raises(ConfigError, match=unknown):
        skyrl_gym.make(ENV_CLASS, env_config={"env_id": "mylab/Nope-v0"}, extras={"task_id": "q1"})
    with pytest.raises(ConfigError, match=rf"{key} mylab_nope: no module 'mylab_nope'"):
        skyrl_gym.make(ENV_CLASS, env_config={"env_id": IMPORTED_ENV, "imports": ["mylab_nope"]}, extras={})
