"""`SelfSearchEnv` (SSRL): the policy writes its own search results."""

import pytest
from gymnasium.utils.env_checker import check_env

from searchgym.envs.rewards import RewardWeights
from searchgym.envs.self_search import SelfSearchEnv
from searchgym.tasks.task import Task

TASK = Task(id="t", question="What is the capital of Norway?", answers=("Oslo",))


def start(**kwargs):
    env = SelfSearchEnv([TASK], **kwargs)
    observation, info = env.reset(options={"task": TASK})
    return env, observation, info


def test_passes_the_env_checker():
    check_env(SelfSearchEnv([TASK]), skip_render_check=True)


def test_a_search_opens_an_information_block_the_policy_fills():
    env, observation, info = start()
    assert "<information>" in observation and "Question: What is the capital of Norway?" in observation
    assert "</information>" in info["protocol"].stop
    obs, reward, terminated, _, info = env.step("<think>I recall</think><search> capital of Norway </search>")
    assert obs == "\n\n<information>" and not terminated and info["n_searches"] == 1
    obs, reward, terminated, _, info = env.step(
        "Oslo is the capital. <answer> Bergen </answer></information>"
    )
    assert obs == "\n\n" and info["self_information"] and not terminated  # tags inside are not actions
    obs, reward, terminated, _, info = env.step("<answer> Oslo </answer>")
    assert terminated and info["em"] == 1.0 and reward == pytest.approx(0.9 + 0.1)


def test_unclosed_information_is_closed_by_the_env():
    env, _, _ = start()
    env.step("<search> q </search>")
    obs, *_ = env.step("a long text cut by the token limit")
    assert obs == "</information>\n\n"


def test_answer_tag_spam_cuts_the_outcome_by_four():
    env, _, _ = start(rewards=RewardWeights(outcome=1.0))
    env.step("<answer>" * 11)  # invalid (unclosed), but every tag counts
    *_, info = env.step("<answer> Oslo </answer>")
    assert info["answer_tags"] == 12 and info["reward_components"]["outcome"] == 0.25


def test_search_costs_apply_per_call():
    env, _, _ = start(rewards=RewardWeights(per_search=0.1))
    _, reward, *_ = env.step("<search> q </search>")
    assert reward == pytest.approx(-0.1)
