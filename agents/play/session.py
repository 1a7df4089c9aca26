"""One searchgym env played for another trainer: what every adapter shares.

An `EnvSession` wraps a made env (by id and options, as ``searchgym eval`` makes it) and plays it
the two ways other trainers send actions: raw model text (parsed by the env's own protocol) or a
structured tool call (``call("search", {"query": ...})``, written in the env's protocol and then
parsed like any text, so invalid arguments, costs and turn limits are exactly the env's). It
records the episode with `Episode.record`, as every player does, so an adapter's figures
(`episode_figures`) are ``searchgym eval``'s, and reports ``info`` as JSON (`jsonable`) for the
wire.

On the client side, `agent_reset_info` turns such JSON back into the `ResetInfo` a scripted agent
reads (its task and the env's action protocol), so the oracle and heuristic agents can play an env
across any transport.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from searchgym.agents.play.episode import Episode
from searchgym.envs.contract import check_reset_info, check_step_info, check_trainable_env
from searchgym.envs.protocols import ActionProtocol, make_protocol
from searchgym.envs.registry import make
from searchgym.envs.tools import Tool, ToolCall
from searchgym.errors import ConfigError
from searchgym.tasks.task import Task

ANSWERED = "Your answer is recorded. The episode is over."
EPISODE_OVER = "The episode is over; tool calls are no longer carried out."
TURN_LIMIT = "The turn limit is reached. The episode is over."


@dataclass(frozen=True)
class Step:
    """What one step returned, with ``info`` as JSON (`jsonable`)."""

    observation: str
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any]

    @property
    def done(self) -> bool:
        return self.terminated or self.truncated


def tool_message(protocol: ActionProtocol, observation: str, terminated: bool, truncated: bool) -> str:
    """What a model reads after a tool call in a chat (whose template adds the result tags): the
    observation without them, `ANSWERED` after the answer, and `TURN_LIMIT` after the last turn.

    >>> from searchgym.envs.protocols import ToolCallsProtocol
    >>> tool_message(ToolCallsProtocol(), "<tool_response>Doc 1</tool_response>", False, True)
    'Doc 1\\n\\nThe turn limit is reached. The episode is over.'
    """
    if terminated:  # only an answer terminates (never together with truncated)
        return ANSWERED
    text = protocol.unwrap_result(observation)
    return f"{text}\n\n{TURN_LIMIT}".lstrip() if truncated else text


class EnvSession:
    """A searchgym env for one client: ``reset`` picks a task, ``step`` plays text, ``call`` plays a
    tool call; ``episode`` is the episode so far (see the module docstring)."""

    def __init__(self, env: str | gym.Env, **env_kwargs: Any) -> None:
        if isinstance(env, str):
            self.env_id = env
            env = make(env, **env_kwargs)
        elif env_kwargs:
            raise ConfigError(f"env options {sorted(env_kwargs)} apply only when the env is given by id")
        else:
            self.env_id = env.spec.id if env.spec else type(env.unwrapped).__name__
        self.env = env
        self.tasks: Sequence[Task] = check_trainable_env(env)
        self.protocol: ActionProtocol = env.unwrapped.protocol
        self.episode: Episode | None = None
        self.reset_info: dict[str, Any] = {}

    @property
    def tools(self) -> tuple[Tool, ...]:
        return self.protocol.tools

    @property
    def done(self) -> bool:
        return self.episode is None or self.episode.terminated or self.episode.truncated

    def task(self, *, task_index: int | None = None, task_id: str | None = None) -> Task:
        """One of the env's tasks by position or id; `ConfigError` naming the valid range."""
        if task_id is not None:
            for task in self.tasks:
                if task.id == task_id:
                    return task
            raise ConfigError(f"task {task_id!r} is not one of the {len(self.tasks)} tasks of {self.env_id}")
        if task_index is None or not 0 <= task_index < len(self.tasks):
            raise ConfigError(
                f"task_index must be in [0, {len(self.tasks)}) for {self.env_id}, got {task_index}"
            )
        return self.tasks[task_index]

    def reset(
        self,
        *,
        seed: int | None = None,
        task: Task | None = None,
        task_index: int | None = None,
        task_id: str | None = None,
    ) -> tuple[str, dict[str, Any]]:
        """Start an episode: of ``task``, of one of the env's tasks (``task_index`` or
        ``task_id``), or of the task the env's RNG draws after seeding it with ``seed``. Returns
        the first observation and the reset info as JSON (the raw info is ``reset_info``)."""
        if task is None and (task_index is not None or task_id is not None):
            task = self.task(task_index=task_index, task_id=task_id)
        observation, info = self.env.reset(seed=seed, options={"task": task} if task else None)
        check_reset_info(info, self.env)
        self.reset_info = info
        self.episode = Episode.of(info["task"])
        return observation, {**jsonable(info), "tools": [t.schema() for t in self.tools]}

    def step(self, text: str) -> Step:
        """Play ``text`` as the agent's next action (parsed by the env's protocol)."""
        if self.episode is None:
            raise RuntimeError("no episode: call reset() first")
        if self.done:
            raise RuntimeError("the episode is over: call reset() to start another")
        observation, reward, terminated, truncated, info = self.env.step(text)
        check_step_info(info, self.env)
        self.episode.record(text, observation, reward, terminated, truncated, info)
        return Step(observation, float(reward), bool(terminated), bool(truncated), jsonable(info))

    def call(self, name: str, arguments: Mapping[str, Any]) -> Step:
        """Play one call of the tool ``name`` as the agent's next action. A tool the env lacks or
        arguments it does not take are the caller's error (`ValueError`, nothing is played);
        an empty argument is played, and the env counts it as an invalid action."""
        return self.step(self.action_text(name, arguments))  # action_text checks before anything plays

    def action_text(self, name: str, arguments: Mapping[str, Any]) -> str:
        """The text, in the env's protocol, of one call of ``name`` with ``arguments``."""
        tool = next((t for t in self.tools if t.name == name), None)
        if tool is None:
            raise ValueError(
                f"unknown tool {name!r}; the tools of {self.env_id} are {[t.name for t in self.tools]}"
            )
        expected = {p.name for p in tool.params}
        if set(arguments) != expected or not all(isinstance(v, str) for v in arguments.values()):
            raise ValueError(
                f"{name} takes exactly the string argument(s) {sorted(expected)}, got {dict(arguments)!r}"
            )
        return self.protocol.format_call(ToolCall(name, dict(arguments)))

    def close(self) -> None:
        self.env.close()


@dataclass(frozen=True)
class TaskStart:
    """A task as a trainer's dataset row starts it: its first observation (the prompt: the
    instructions and the question) and the seed its env is reset with."""

    task: Task
    prompt: str
    seed: int


def task_starts(session: EnvSession, tasks: Sequence[Task] | None = None, seed: int = 0) -> list[TaskStart]:
    """``tasks`` (default: the session's env's own) as `TaskStart`s, task ``i`` reset with seed
    ``seed + i`` as ``searchgym eval`` resets it; `ConfigError` for no task."""
    tasks = session.tasks if tasks is None else tasks
    if not tasks:
        raise ConfigError(f"no task to start for {session.env_id}: give at least one")
    starts = []
    for i, task in enumerate(tasks):
        prompt, _ = session.reset(seed=seed + i, task=task)
        starts.append(TaskStart(task, prompt, seed + i))
    return starts


def row_task(
    row: Mapping[str, Any],
    own_task: Callable[[str], Task],
    *,
    where: str,
    builder: str,
    needs: str = "a 'task' (JSON) or 'task_id' column",
) -> Task:
    """The task of one row of a trainer's dataset: its ``task`` (a task as JSON text or as a
    mapping), else its ``task_id``, which ``own_task`` finds among the env's tasks (a column that
    holds None counts as absent). A row with neither is a `ConfigError` that says ``where`` the
    row was, what it ``needs``, the columns that hold a value and the ``builder`` that writes such
    rows.

    >>> row = {"task": '{"id": "t", "question": "Q?", "answers": ["A"]}', "prompt": "..."}
    >>> row_task(row, None, where="a row", builder="rows()").answers
    ('A',)
    """
    task = row.get("task")
    if task is not None:
        return Task.from_dict(json.loads(task) if isinstance(task, str) else dict(task))
    if row.get("task_id") is not None:
        return own_task(str(row["task_id"]))
    columns = sorted(name for name, value in row.items() if value is not None)
    raise ConfigError(f"{where} needs {needs}; got columns {columns}; build rows with {builder}")


def jsonable(value: Any) -> Any:
    """``value`` as plain JSON: tasks as their dicts, protocols by name, dataclasses as dicts,
    non-finite floats as None, anything else unknown as its ``str``.

    >>> jsonable({"x": (1, float("nan")), "task": Task("t", "Q?", ("A",))})["x"]
    [1, None]
    """
    if isinstance(value, Task):
        return value.to_dict()
    if isinstance(value, ActionProtocol):
        return value.name
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return jsonable(dataclasses.asdict(value))
    return str(value)


def agent_reset_info(info: Mapping[str, Any]) -> dict[str, Any]:
    """The `ResetInfo` a scripted agent reads, rebuilt from `EnvSession.reset`'s JSON info: the
    task (`wire_task`) and the env's action protocol over the same tools."""
    tools = [Tool.from_schema(schema) for schema in info["tools"]]
    return {
        **info,
        "task": wire_task(info["task"]),
        "protocol": make_protocol(info["protocol"], tools),
    }


def wire_task(row: Mapping[str, Any]) -> Task:
    """A task as a server sent it: whole, or its id and question only (a `searchgym serve-env`
    server keeps the gold answers, evidence and metadata unless started with --reveal-answers).

    >>> wire_task({"id": "t", "question": "Q?"}).answers
    ()
    """
    return Task.from_dict({"answers": (), **row})
