"""Agent programs through `ProgramPlayer`: the env's tools, answers returned or submitted, async
programs, programs that fail (each ending its own episode with a recorded error while the others
play on), and time limits that count a program's own time, not its waits for the model."""

import asyncio
import re
import time

import pytest
from scripted_policy import ScriptedPolicy

from searchgym.agents.gateway.server import Gateway
from searchgym.agents.play.programs import EpisodeTools, ProgramPlayer, load_program
from searchgym.agents.play.session import EnvSession
from searchgym.envs.registry import make
from searchgym.errors import ConfigError
from searchgym.generation import SamplingParams

ENV = "searchgym/FictionalQA-BM25-v0"
PARAMS = SamplingParams(max_new_tokens=8)


@pytest.fixture(scope="module")
def tokenizer(tiny_llama_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_llama_dir)


def envs(n=2):
    return [make(ENV, split="dev", n_passages=300, max_turns=3) for _ in range(n)]


class SlowPolicy(ScriptedPolicy):
    """A scripted policy whose every generation call takes ``delay_s``: a busy shared model."""

    def __init__(self, tokenizer, script, delay_s):
        super().__init__(tokenizer, script)
        self.delay_s = delay_s

    def generate(self, prompts, params):
        time.sleep(self.delay_s)
        return super().generate(prompts, params)


def play(tokenizer, programs, script=None, time_limit_s=30.0, delay_s=0.0, **limits):
    """One episode per program (given as a list, each on its own task), in order; each generation
    call takes ``delay_s``."""
    env_list = envs()
    tasks = list(env_list[0].unwrapped.tasks[: len(programs)])
    by_question = {task.question: program for task, program in zip(tasks, programs)}

    def dispatch(question, client, tools):
        return by_question[question](question, client, tools)

    async def dispatch_async(question, client, tools):
        return await by_question[question](question, client, tools)

    policy = SlowPolicy(tokenizer, script or ["reply"] * 20, delay_s)
    with Gateway(policy, PARAMS) as gateway:
        is_async = asyncio.iscoroutinefunction(programs[0])
        program = dispatch_async if is_async else dispatch
        player = ProgramPlayer(program, gateway, time_limit_s=time_limit_s, **limits)
        return player.play(env_list, tasks, PARAMS, seed=0), tasks


def ask(client):
    return client.chat.completions.create(model="m", messages=[{"role": "user", "content": "Q"}])


def test_a_returned_answer_is_played_and_scored_by_the_env(tokenizer):
    def answers_gold(question, client, tools):
        ask(client)
        tools.search(query=question)
        return gold[question]

    env = envs(1)[0]
    gold = {t.question: t.answers[0] for t in env.unwrapped.tasks[:2]}
    (right, _), _ = play(tokenizer, [answers_gold, answers_gold])
    assert right.em == 1.0 and right.error is None and right.terminated
    assert [t.tool for t in right.turns] == ["search", "answer"] and right.total_reward == 1.0
    assert len(right.streams) == 1


def test_a_program_may_answer_through_the_tool_and_return_none(tokenizer):
    def answers_itself(question, client, tools):
        assert "answer" in tools.names and tools.schemas[0]["type"] == "function"
        reply = tools.answer(answer="nobody")
        assert tools.done and "recorded" in reply
        assert tools.search(query="late") == "The episode is over; tool calls are no longer carried out."

    (episode,), _ = play(tokenizer, [answers_itself])
    assert episode.error is None and episode.prediction == "nobody" and episode.streams == []


def test_async_programs_get_an_async_client(tokenizer):
    async def async_program(question, client, tools):
        replies = await asyncio.gather(*(client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": q}]) for q in ("a", "b")))  # fmt: skip
        return replies[0].choices[0].message.content

    (episode,), _ = play(tokenizer, [async_program])
    assert episode.error is None and episode.prediction == "reply" and len(episode.streams) == 2


def raises(question, client, tools):
    ask(client)
    raise ValueError("my bug")


def hangs(question, client, tools):
    tools.search(query=question)
    time.sleep(60)


async def hangs_async(question, client, tools):
    await asyncio.sleep(60)


def never_answers(question, client, tools):
    ask(client)


def returns_a_number(question, client, tools):
    return 42


def sends_a_malformed_request(question, client, tools):
    client.chat.completions.create(model="m", messages=[])  # openai raises the 400 in the program


def fine(question, client, tools):
    ask(client)
    return "something"


@pytest.mark.parametrize(
    "bad, error",
    [
        (raises, "the program raised ValueError: my bug"),
        (hangs, "the program ran past its time limit of 1 s"),
        (never_answers, "the program returned no answer and did not call tools.answer"),
        (returns_a_number, "the program returned a int; return the answer text, or None after tools.answer"),
        (sends_a_malformed_request, "BadRequestError"),
    ],
)
def test_a_failing_program_ends_its_episode_with_the_error_and_the_others_play_on(tokenizer, bad, error):
    (failed, ok), _ = play(tokenizer, [bad, fine], time_limit_s=1.0)
    assert error in failed.error
    assert not failed.terminated and failed.em == 0.0  # scored as the env left it
    assert ok.error is None and ok.prediction == "something" and ok.terminated
    if bad is raises or bad is never_answers:
        assert len(failed.streams) == 1  # the calls it made are still its samples
    if bad is sends_a_malformed_request:
        assert "messages must be a non-empty list" in failed.error  # the gateway's own note
        assert failed.streams == []  # no tokens: nothing to train on


def test_an_async_program_past_its_time_limit_is_cancelled(tokenizer):
    (episode,), _ = play(tokenizer, [hangs_async], time_limit_s=1.0)
    assert episode.error.startswith("the program ran past its time limit of 1 s of its own time")


def asks_twice(question, client, tools):
    ask(client)
    return ask(client).choices[0].message.content


async def asks_twice_async(question, client, tools):
    for _ in range(2):
        reply = await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "Q"}])
    return reply.choices[0].message.content


@pytest.mark.parametrize("program", [asks_twice, asks_twice_async])
def test_waiting_for_a_busy_model_is_not_the_programs_time(tokenizer, program):
    """Each call waits 1.5 s for the shared model: 3 s in all, past a 1 s limit that counts only
    the program's own time."""
    (episode,), _ = play(tokenizer, [program], time_limit_s=1.0, delay_s=1.5)
    assert episode.error is None and episode.terminated


def waits_then_sleeps(question, client, tools):
    ask(client)
    time.sleep(60)


def test_a_program_that_sleeps_past_its_limit_is_timed_out_whatever_it_waited_for_the_model(tokenizer):
    start = time.monotonic()
    (episode,), _ = play(tokenizer, [waits_then_sleeps], time_limit_s=1.0, delay_s=1.5)
    assert episode.error.startswith("the program ran past its time limit of 1 s of its own time")
    waited = float(re.search(r"it waited ([0-9.]+) s for the model", episode.error).group(1))
    assert waited >= 1.5 and time.monotonic() - start < 10


def test_a_hung_generation_ends_the_episode_at_its_wall_clock_limit(tokenizer):
    (episode,), _ = play(tokenizer, [asks_twice], time_limit_s=1.0, delay_s=3.0, wall_limit_s=2.0)
    assert episode.error.startswith("the episode ran past its wall-clock limit of 2 s")


def returns_an_empty_answer(question, client, tools):
    return ""


def answers_empty_then_returns_none(question, client, tools):
    assert "invalid" in tools.answer(answer=" ")


@pytest.mark.parametrize(
    "program, error",
    [
        (returns_an_empty_answer, "the env refused the returned answer '': "),
        (answers_empty_then_returns_none, "the env refused the program's tools.answer call: "),
    ],
)
def test_an_answer_the_env_refuses_is_the_episodes_error_in_the_envs_words(tokenizer, program, error):
    (episode,), _ = play(tokenizer, [program])
    assert episode.error == error + "My previous action is invalid: answer needs a non-empty 'answer'"
    assert episode.prediction is None and not episode.terminated


def test_a_timed_out_programs_tools_are_closed(tokenizer):
    session = EnvSession(make(ENV, split="dev", n_passages=300))
    instructions, _ = session.reset(task_index=0)
    tools = EpisodeTools(session, instructions)
    tools.close()
    with pytest.raises(RuntimeError, match="time limit"):
        tools.search(query="x")
    with pytest.raises(AttributeError, match="not one of this env's tools"):
        tools.browse(url="x")


@pytest.mark.parametrize(
    "spec, message",
    [
        ("no_colon", "module:function or file.py:function"),
        ("missing_module_xyz:run", "cannot import the program's module"),
        ("missing/file.py:run", "does not exist"),
        ("json:nothing_here", "has no function 'nothing_here'"),
        ("json:dumps", "must take (question, client, tools)"),
    ],
)
def test_a_program_that_cannot_load_is_a_clear_config_error(spec, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_program(spec)
