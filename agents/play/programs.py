"""Agent programs: your own agent, unchanged, played on searchgym's envs through the gateway.

A program is a function ``run(question, client, tools)`` (or ``async def``): ``question`` is the
task's question, ``client`` an ``openai.OpenAI`` (``openai.AsyncOpenAI`` for an async program)
whose base URL and API key are the episode's own at the `Gateway` (any model name is accepted;
frameworks that take a base URL and key read ``client.base_url`` and ``client.api_key``), and
``tools`` the episode's env tools (`EpisodeTools`). It returns its answer, or None after calling
``tools.answer``. Each tool call is a step of the env, so costs, tool errors, turn limits and the
answer are scored by the env's own rubric, as for any agent.

`ProgramPlayer` plays many episodes at once (one thread per env) against a `ModelEndpoint` (the
gateway, `searchgym.agents.gateway.server.Gateway`, is one), each under a time limit that
counts the program's own time: the wall-clock time since it started less the time in which its
requests waited for the model (queued for a shared generation call, or being generated:
`ModelEndpoint.waited_s`), so programs that wait for each other's batches are not timed out for it.
Tool calls (the env's searches) are the program's own time. A hard wall-clock limit,
`WALL_LIMIT_FACTOR` times the time limit, ends an episode whose generation hangs. A program that
raises, runs past a limit, returns no answer, returns an answer the env refuses or sends
malformed requests ends its episode with ``Episode.error`` set; the episode is scored as the env
left it, its recorded calls are its training samples (none if it made no call), and the others
play on.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import inspect
import itertools
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import gymnasium as gym

from searchgym.agents.play.episode import Episode
from searchgym.agents.play.session import EPISODE_OVER, EnvSession, tool_message
from searchgym.agents.policies.agent import Trajectory
from searchgym.errors import ConfigError
from searchgym.generation import SamplingParams
from searchgym.tasks.task import Task

Program = Callable[[str, Any, "EpisodeTools"], Any]
WALL_LIMIT_FACTOR = 10
"""An episode ends after this many times its time limit of wall-clock time, waits included."""
POLL_S = 0.05


def load_program(spec: str) -> Program:
    """The program ``spec`` names: ``package.module:function`` (the current directory is on the
    import path) or ``path/to/file.py:function``; a `ConfigError` says what is missing."""
    target, _, attr = spec.rpartition(":")
    if not target or not attr:
        raise ConfigError(f"--program takes module:function or file.py:function, got {spec!r}")
    try:
        if target.endswith(".py"):
            path = Path(target)
            if not path.is_file():
                raise ConfigError(f"program file {target} does not exist")
            module_spec = importlib.util.spec_from_file_location(path.stem, path)
            module = importlib.util.module_from_spec(module_spec)  # type: ignore[arg-type]
            module_spec.loader.exec_module(module)  # type: ignore[union-attr]
        else:
            import sys

            if "" not in sys.path and str(Path.cwd()) not in sys.path:
                sys.path.insert(0, str(Path.cwd()))
            module = importlib.import_module(target)
    except ImportError as error:
        raise ConfigError(f"cannot import the program's module {target!r}: {error}") from None
    program = getattr(module, attr, None)
    if not callable(program):
        raise ConfigError(f"{target} has no function {attr!r} (--program {spec})")
    try:
        inspect.signature(program).bind("question", "client", "tools")
    except TypeError:
        raise ConfigError(f"the program {spec} must take (question, client, tools)") from None
    except ValueError:
        pass  # a builtin without a signature: called as it is
    return program


@dataclass(frozen=True)
class EndedEpisode:
    """What a model endpoint recorded of one episode: its calls as token streams (the training
    samples), and the errors its requests met."""

    streams: list[Trajectory]
    errors: list[str]


class ModelEndpoint(Protocol):
    """The model server that programs' episodes call, as `ProgramPlayer` uses it: an
    OpenAI-compatible server at ``url`` (``url + "/v1"`` is the base URL) whose API keys are
    episodes."""

    url: str

    def reseed(self, seed: int) -> None:
        """Seed the model's sampling (no generation runs meanwhile)."""

    def open_episode(self, name: str, params: SamplingParams | None = None) -> str:
        """A new episode's API key; its calls sample with ``params``."""

    def waited_s(self, key: str) -> float:
        """Seconds so far in which the episode's requests waited for the model."""

    def end_episode(self, key: str) -> EndedEpisode:
        """End the episode of ``key`` (its requests are refused from now on), free what the
        model kept of it, and return what was recorded."""


class EpisodeTools:
    """The env's tools for one episode's program: ``call(name, **arguments)`` plays one tool call
    as the env's next step and returns what the tool returned (the text a model reads), and each
    tool is a method too (``tools.search(query=...)``, ``tools.answer(answer=...)``). ``schemas``
    are the tools as OpenAI function tools, for a program that hands them to its model.
    After the episode ends, a call returns `EPISODE_OVER`; after its time limit, it raises."""

    def __init__(self, session: EnvSession, instructions: str) -> None:
        self._session = session
        self.instructions = instructions
        """The env's first observation: its own instructions and the question."""
        self.names = [t.name for t in session.tools]
        self.schemas = [t.schema() for t in session.tools]
        self._lock = threading.Lock()
        self._closed = False
        self.refused: str | None = None
        """What the env said to the latest answer it did not take (the episode played on)."""

    @property
    def done(self) -> bool:
        """The episode is over (the program answered, or reached the env's turn limit)."""
        return self._session.done

    def call(self, name: str, /, **arguments: str) -> str:
        with self._lock:
            if self._closed:
                raise RuntimeError("this episode has ended (its time limit passed); its tools are closed")
            if self._session.done:
                return EPISODE_OVER
            step = self._session.call(name, arguments)
            message = tool_message(self._session.protocol, step.observation, step.terminated, step.truncated)
            if name == "answer" and not step.terminated:
                self.refused = message
        return message

    def __getattr__(self, name: str) -> Callable[..., str]:
        if name.startswith("_") or name not in self.__dict__.get("names", ()):
            raise AttributeError(f"{name!r} is not one of this env's tools ({', '.join(self.names)})")
        return lambda **arguments: self.call(name, **arguments)

    def close(self) -> None:
        with self._lock:
            self._closed = True


class ProgramPlayer:
    """Plays ``program`` on envs against the model at ``endpoint``: an episode may take
    ``time_limit_s`` of the program's own time (waits for the model aside) and ``wall_limit_s``
    of wall-clock time (default `WALL_LIMIT_FACTOR` times ``time_limit_s``)."""

    def __init__(
        self,
        program: Program,
        endpoint: ModelEndpoint,
        *,
        time_limit_s: float = 300.0,
        wall_limit_s: float | None = None,
    ) -> None:
        self.program = program
        self.endpoint = endpoint
        self.time_limit_s = time_limit_s
        self.wall_limit_s = wall_limit_s or WALL_LIMIT_FACTOR * time_limit_s

    def play(
        self,
        envs: Sequence[gym.Env],
        tasks: Sequence[Task],
        params: SamplingParams,
        seed: int,
        on_episode: Callable[[Episode], None] | None = None,
    ) -> list[Episode]:
        """One episode of every task, in task order, ``len(envs)`` at a time; task ``i`` is reset
        with seed ``seed + i`` and samples with ``params``."""
        self.endpoint.reseed(seed)
        todo: queue.Queue = queue.Queue()
        for item in enumerate(tasks):
            todo.put(item)
        episodes: list[Any] = [None] * len(tasks)
        failures: list[BaseException] = []

        def work(env: gym.Env) -> None:
            try:
                session = EnvSession(env)
                while True:
                    try:
                        i, task = todo.get_nowait()
                    except queue.Empty:
                        return
                    episodes[i] = self._play_one(session, task, seed + i, params)
                    if on_episode is not None:
                        on_episode(episodes[i])
            except BaseException as error:  # a bug of ours or the env's: raised in the caller
                failures.append(error)

        workers = [threading.Thread(target=work, args=(env,), daemon=True) for env in envs[: len(tasks)]]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        if failures:
            raise failures[0]
        return episodes

    def _play_one(self, session: EnvSession, task: Task, seed: int, params: SamplingParams) -> Episode:
        instructions, _ = session.reset(seed=seed, task=task)
        key = self.endpoint.open_episode(task.id, params)
        tools = EpisodeTools(session, instructions)
        limits = Limits(self.time_limit_s, self.wall_limit_s, lambda: self.endpoint.waited_s(key))
        base_url = self.endpoint.url + "/v1"
        result, error = run_program(self.program, task.question, base_url, key, tools, limits)
        ended = self.endpoint.end_episode(key)
        tools.close()
        if error is None:
            error = self._submit(session, tools, result)
        episode = session.episode
        assert episode is not None
        episode.error = "; ".join([e for e in [error, *ended.errors] if e]) or None
        episode.streams = ended.streams
        return episode

    @staticmethod
    def _submit(session: EnvSession, tools: EpisodeTools, result: Any) -> str | None:
        """Play a returned answer where the program did not answer itself; the error, if any."""
        if result is not None and not isinstance(result, str):
            kind = type(result).__name__
            return f"the program returned a {kind}; return the answer text, or None after tools.answer"
        if session.done:
            return None
        if result is None:
            if tools.refused is not None:
                return f"the env refused the program's tools.answer call: {_first_sentence(tools.refused)}"
            return "the program returned no answer and did not call tools.answer"
        answer = next(t for t in session.tools if t.name == "answer")
        step = session.call("answer", {answer.params[0].name: result})
        if step.terminated:
            return None
        said = tool_message(session.protocol, step.observation, step.terminated, step.truncated)
        return f"the env refused the returned answer {result[:80]!r}: {_first_sentence(said)}"


def _first_sentence(text: str) -> str:
    """The first sentence of what an env said (its observations go on with instructions).

    >>> _first_sentence("My previous action is invalid: answer needs a non-empty 'answer'. To search, ...")
    "My previous action is invalid: answer needs a non-empty 'answer'"
    """
    return text.strip().split(". ")[0][:300]


@dataclass(frozen=True)
class Limits:
    """An episode's limits: ``own_s`` seconds of the program's own time, the wall-clock time since
    it started less ``waited_s()`` (the seconds its requests waited for the model), and ``wall_s``
    seconds of wall-clock time in all."""

    own_s: float
    wall_s: float
    waited_s: Callable[[], float] = lambda: 0.0


def run_program(
    program: Program, question: str, base_url: str, key: str, tools: EpisodeTools, limits: Limits
) -> tuple[Any, str | None]:
    """Run one episode of ``program`` in a thread of its own; its result, or what went wrong (it
    raised, or ran past one of its `Limits`: an async program is cancelled, a sync one is left to
    its daemon thread, its credentials and tools closed by the caller)."""
    import openai  # the client a program gets; loaded when a program plays, not with the trainer

    outcome: dict[str, Any] = {}
    over = threading.Event()

    def target() -> None:
        try:
            # the client waits as long as the episode may: a wait for the model is not the program's time
            credentials = {"base_url": base_url, "api_key": key, "max_retries": 0, "timeout": limits.wall_s}
            if inspect.iscoroutinefunction(program):
                outcome["value"] = asyncio.run(_run_async(program, question, credentials, tools, over))
            else:
                with openai.OpenAI(**credentials) as client:
                    outcome["value"] = program(question, client, tools)
        except BaseException as error:  # the program's failure is the episode's, not the run's
            outcome["error"] = f"the program raised {type(error).__name__}: {error}"

    thread = threading.Thread(target=target, name=f"searchgym-program-{next(_numbers)}", daemon=True)
    start = time.monotonic()
    thread.start()
    while True:
        thread.join(POLL_S)
        if not thread.is_alive():
            return outcome.get("value"), outcome.get("error")
        wall = time.monotonic() - start
        waited = limits.waited_s()
        if wall - waited > limits.own_s:
            error = f"the program ran past its time limit of {limits.own_s:g} s of its own time"
            break
        if wall > limits.wall_s:
            error = f"the episode ran past its wall-clock limit of {limits.wall_s:g} s"
            break
    over.set()
    thread.join(1.0)  # an async program is cancelled; a sync one runs on in its daemon thread
    return None, f"{error} (it waited {waited:.1f} s for the model in {wall:.1f} s)"


async def _run_async(
    program: Program, question: str, credentials: dict[str, Any], tools: EpisodeTools, over: threading.Event
) -> Any:
    """Run an async program until it returns, or cancel it once ``over`` is set."""
    import openai

    async with openai.AsyncOpenAI(**credentials) as client:
        task = asyncio.ensure_future(program(question, client, tools))
        while not task.done():
            await asyncio.wait({task}, timeout=POLL_S)
            if over.is_set() and not task.done():
                task.cancel()
                await asyncio.wait({task}, timeout=1.0)
                return None
        return task.result()


_numbers = itertools.count()
