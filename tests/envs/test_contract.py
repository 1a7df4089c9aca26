"""The env contract: a user's env that misses what the rollout reads gets an error naming it; the
three-concept env (tasks, retriever, register) keeps it and takes every standard option."""

import gymnasium as gym
import pytest

import searchgym
from searchgym.agents import OracleAgent, make_agent, run_episodes
from searchgym.cli import main
from searchgym.envs.contract import check_env_contract, check_step_info
from searchgym.envs.spaces import UnicodeText
from searchgym.errors import ConfigError, EnvContractError
from searchgym.retrievers import BM25, Doc
from searchgym.tasks import Task

PASSAGES = [
    Doc("d1", "Ada Lovelace", "Ada Lovelace published the first computer program in 1843."),
    Doc("d2", "Alan Turing", "Alan Turing described the Turing machine in 1936."),
]


@pytest.fixture
def registered():
    ids = []

    def register(env_id, **kwargs):
        searchgym.register(env_id, **kwargs)
        ids.append(env_id)

    yield register
    for env_id in ids:
        del gym.registry[env_id]


class Silent(gym.Env):
    """A gymnasium env that reports nothing in its infos and never ends."""

    observation_space = action_space = UnicodeText(1000)

    def __init__(self):
        self.tasks = [Task("t", "When?", ("1843",))]
        self.protocol = searchgym.envs.make_protocol("tags")

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        info = {"task": self.tasks[0], "task_id": "t", "question": "When?", "protocol": self.protocol}
        return "When?", {**info, "turn": 0}

    def step(self, action):
        return "nothing", 0.0, False, False, {"tool": None}


def test_a_step_info_without_a_key_names_it_and_how_to_add_it(registered):
    registered("contract/Silent-v0", entry_point=Silent)
    env = searchgym.make("contract/Silent-v0")
    with pytest.raises(EnvContractError, match=r"lacks 'turn', 'error', 'reward_components'.*Add them to"):
        run_episodes(lambda: env, lambda: OracleAgent(), env.unwrapped.tasks)
    with pytest.raises(
        EnvContractError,
        match=r"lacks 'reward_components'.*Add it to the info dict \(reward_components: report",
    ):
        check_step_info({"tool": None, "error": None, "turn": 1, "n_searches": 0, "n_invalid": 0,
                         "n_errors": 0, "obs_tokens": 0}, env)  # fmt: skip


def test_an_env_without_tasks_is_refused_before_any_episode(registered, capsys):
    class NoTasks(Silent):
        def __init__(self):
            super().__init__()
            del self.tasks

    registered("contract/NoTasks-v0", entry_point=NoTasks)
    with pytest.raises(EnvContractError, match="exposes no tasks: set self.tasks"):
        check_env_contract(searchgym.make("contract/NoTasks-v0"))
    assert main(["eval", "--env", "contract/NoTasks-v0", "--n", "1", "--no-progress"]) == 2
    assert "contract/NoTasks-v0 exposes no tasks" in capsys.readouterr().err


def test_a_user_factory_gets_a_turn_limit_and_a_clear_error_for_options_it_lacks(registered):
    registered("contract/Silent-v1", entry_point=Silent)
    env = searchgym.make("contract/Silent-v1", max_turns=3)
    env.reset(seed=0)
    ends = [env.step("<search> q </search>")[3] for _ in range(3)]
    assert ends == [False, False, True]  # an agent that never answers still stops
    with pytest.raises(ConfigError, match="'Silent' takes no 'split': add it to its parameters"):
        searchgym.make("contract/Silent-v1", split="dev")


def test_three_concepts_make_a_trainable_qa_env(registered):
    dev = {"question": "When did Ada Lovelace publish the first program?", "answers": ["1843"]}
    tasks = {"train": [("When was the Turing machine described?", "1936")], "dev": [dev]}
    registered("contract/History-v0", tasks=tasks, retriever=BM25.build(PASSAGES))
    env = searchgym.make("contract/History-v0", split="train", max_turns=2, protocol="tool_calls", top_k=1)
    check_env_contract(env)
    assert [t.question for t in env.unwrapped.tasks] == ["When was the Turing machine described?"]
    [episode] = run_episodes(
        lambda: searchgym.make("contract/History-v0"), lambda: make_agent("heuristic"), list(tasks_of(env))
    )
    assert episode.n_searches == 1 and episode.turns[0].doc_ids
    with pytest.raises(ConfigError, match=r"no split 'test'.*\['dev', 'train'\]"):
        searchgym.make("contract/History-v0", split="test")


def tasks_of(env):
    return env.unwrapped.tasks


def test_register_refuses_half_a_qa_env_or_a_retriever_without_search():
    with pytest.raises(ConfigError, match="needs both tasks=... and retriever=..."):
        searchgym.register("contract/Half-v0", tasks=[("q?", "a")])
    with pytest.raises(ConfigError, match="retriever must have search"):
        searchgym.register("contract/Half-v0", tasks=[("q?", "a")], retriever=object())
    with pytest.raises(ConfigError, match="not both"):
        searchgym.register("contract/Half-v0", entry_point=Silent, tasks=[("q?", "a")], retriever=object())
    with pytest.raises(ConfigError, match=r"task 0 is 'q\?'"):
        searchgym.envs.factories.as_tasks(["q?"])
