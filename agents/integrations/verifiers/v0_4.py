"""The searchgym taskset of verifiers 0.4 (the ``verifiers.v1`` API), id ``searchgym``.

``vf-eval searchgym --env.taskset.env-id ID --env.taskset.options '{...}' -m MODEL ...`` makes
verifiers import the module ``searchgym``, whose ``__all__`` exports `SearchgymTaskset` and
`SearchgymHarness` (lazily, from here). An env of yours is named the same way: an installed
package registers it through the ``searchgym.plugins`` entry points, and a module of yours that
registers it when imported is named by ``--env.taskset.imports '["mylab"]'`` (from the directory
vf-eval runs in, or ``PYTHONPATH``). Its parts:

- `SearchgymTaskset` yields one `SearchgymTask` per task of `env_tasks` (the prompt is the env's
  first observation) and serves `SearchgymToolset`, one MCP server for the whole eval;
- `SearchgymToolset` generates one MCP tool per `Tool` of the env (search, answer, open, ...).
  Each rollout's calls play one live `EnvSession` (the session's key rides the rollout's state),
  and after each call the rollout's state holds the episode so far (`Episode.to_dict`);
- `SearchgymTask` scores the trace with one ``@vf.reward`` per reward component of the env,
  named like it and weighted with the env's weight (`reward_weights`), so the trace's reward is
  the env's summed episode reward; its metrics are EM, F1, cover-EM, searches, turns and the
  other counters, and ``trace.info["searchgym_episode"]`` is the whole episode;
- `SearchgymHarness` is the agent loop, run in process: it asks the model (through verifiers'
  interception endpoint, with the tools as OpenAI functions), runs each tool call through MCP
  and stops when the env's episode is over (answered, or the turn limit) or the model replies
  without a tool call. Any MCP harness of verifiers can play the taskset instead
  (``--env.agent.harness.id null``).
"""

from __future__ import annotations

import inspect
import json
import os
import uuid
from contextlib import AsyncExitStack
from typing import Annotated, Any

from pydantic import Field

from searchgym.agents.integrations.verifiers.shared import (
    DEFAULT_ENV,
    EPISODE_OVER,
    INSTALL,
    env_tasks,
    episode_components,
    play,
    reward_weights,
)
from searchgym.agents.play.episode import Episode, episode_figures
from searchgym.agents.play.session import EnvSession
from searchgym.envs.tools import Tool
from searchgym.errors import ConfigError, DependencyNotInstalled, import_optional
from searchgym.registry import use_env
from searchgym.tasks.task import Task

# verifiers is an optional dependency (its own venv: it pins mcp 2): fail with the install line.
import_optional("verifiers", "verifiers")
import verifiers  # noqa: E402

if tuple(int(part) for part in verifiers.__version__.split(".")[:2]) < (0, 4):
    raise DependencyNotInstalled(
        f"the searchgym taskset needs verifiers >= 0.4 (the verifiers.v1 API), found "
        f"{verifiers.__version__}; install it with: {INSTALL}"
    )
import httpx  # noqa: E402  (a dependency of verifiers)
import verifiers.v1 as vf  # noqa: E402
from openai import AsyncOpenAI  # noqa: E402  (a dependency of verifiers)
from verifiers.v1.harnesses.utils.mcp import call_mcp, connect_mcp  # noqa: E402

IMPORT_KEY = "--env.taskset.imports"

__all__ = [
    "SearchgymConfig",
    "SearchgymData",
    "SearchgymHarness",
    "SearchgymState",
    "SearchgymTask",
    "SearchgymTaskset",
    "SearchgymToolset",
]


class SearchgymConfig(vf.TasksetConfig):
    """``--env.taskset.*``: which env, made with which options, and which of its tasks."""

    env_id: str = DEFAULT_ENV
    """A registered searchgym env id: searchgym's, an installed plug-in's, or one that ``imports``
    registers."""
    options: dict[str, Any] = Field(default_factory=dict)
    """Env options, the keyword arguments of ``searchgym.make`` (``split``, ``hops``, ``protocol``,
    ``max_turns``, ``rewards``, ...), as ``searchgym eval -E key=value`` passes them."""
    imports: list[str] = Field(default_factory=list)
    """Modules of yours to import first, which register the env (as ``searchgym --import``)."""
    n: int | None = None
    """Play the ``n`` tasks that ``searchgym eval --n N --seed SEED`` plays (all when None)."""
    seed: int = 0
    """The seed of that draw; task ``i`` is reset with ``seed + i``, as eval resets it."""


class SearchgymData(vf.TaskData):
    task: dict[str, Any]
    """The searchgym task (`Task.to_dict`)."""
    seed: int
    """The seed its env is reset with."""


class SearchgymState(vf.State):
    """The rollout's state, shared by the host and the tool server."""

    task: dict[str, Any] | None = None
    seed: int | None = None
    session: str | None = None
    """The key of the rollout's live env session in the tool server."""
    episode: dict[str, Any] | None = None
    """The episode so far (`Episode.to_dict`), written after each tool call."""


def _episode(trace: Any) -> Episode | None:
    state = trace.state
    return Episode.from_dict(state.episode) if state.episode is not None else None


class SearchgymTask(vf.Task[SearchgymData, SearchgymState]):
    """One searchgym task. `SearchgymTaskset` gives each env its subclass with one
    ``@vf.reward`` per reward component (`_scored_task`)."""

    async def setup(self, trace: Any, runtime: Any) -> None:
        trace.state.task, trace.state.seed = self.data.task, self.data.seed

    async def finalize(self, trace: Any, runtime: Any) -> None:
        trace.info["searchgym_episode"] = trace.state.episode

    @vf.metric
    async def searchgym(self, trace: Any) -> dict[str, float]:
        """The episode's figures (`episode_figures`; the reward terms are the rubric's own)."""
        ep = _episode(trace) or Episode.of(Task.from_dict(self.data.task))
        return {name: v for name, v in episode_figures(ep).items() if not name.startswith("reward/")}


def _scored_task(weights: dict[str, float]) -> type[SearchgymTask]:
    """`SearchgymTask` with one ``@vf.reward`` per reward component, named like it and weighted
    with the env's weight."""

    def component(name: str, weight: float) -> Any:
        async def score(self: SearchgymTask, trace: Any) -> float:
            return episode_components(_episode(trace), [name])[name]

        score.__name__ = score.__qualname__ = name
        return vf.reward(score, weight=weight)

    methods = {}
    for name, weight in weights.items():
        if hasattr(SearchgymTask, name):
            raise ConfigError(
                f"the reward term {name!r} has the name of an attribute of verifiers' Task; register "
                "the reward function under another name (searchgym.register_reward)"
            )
        methods[name] = component(name, weight)
    return type("SearchgymTask", (SearchgymTask,), {**methods, "__module__": __name__})


class SearchgymToolsetConfig(vf.SharedToolsetConfig):
    env_id: str = DEFAULT_ENV
    options: dict[str, Any] = Field(default_factory=dict)
    imports: list[str] = Field(default_factory=list)
    directory: str = ""
    """Where vf-eval ran: the tool server runs in a directory of its own, and imports from there."""


class SearchgymToolset(vf.Toolset[SearchgymToolsetConfig, SearchgymState]):
    """The env's tools as MCP tools, shared by every rollout of an eval (each plays its own env)."""

    TOOL_PREFIX = None  # the tools keep the env's names: search, answer, ...

    def __init__(self, config: SearchgymToolsetConfig) -> None:
        super().__init__(config)
        self._live: dict[str, EnvSession] = {}
        self._idle: list[EnvSession] = []

    async def setup(self) -> None:
        self._idle.append(self._new_session())

    def register(self, mcp: Any) -> None:
        for tool in self._idle[0].tools:
            mcp.add_tool(
                self._with_state(self._tool_function(tool)), name=tool.name, description=tool.description
            )

    def _new_session(self) -> EnvSession:
        config = self.config
        use_env(config.env_id, config.imports, key=IMPORT_KEY, directory=config.directory or None)
        return EnvSession(config.env_id, **config.options)

    def _tool_function(self, tool: Tool) -> Any:
        """A function whose signature is the tool's parameters (MCP reads its schema from it)."""

        def call(**arguments: str) -> str:
            return self._call(tool.name, arguments)

        call.__name__, call.__doc__ = tool.name, tool.description
        call.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [
                inspect.Parameter(
                    p.name,
                    inspect.Parameter.KEYWORD_ONLY,
                    annotation=Annotated[str, Field(description=p.description)],
                )
                for p in tool.params
            ],
            return_annotation=str,
        )
        return call

    def _call(self, name: str, arguments: dict[str, str]) -> str:
        state = self.state
        if state.session is None:
            if state.task is None:
                raise RuntimeError("the rollout's state has no task: SearchgymTask.setup sets it")
            session = self._idle.pop() if self._idle else self._new_session()
            session.reset(seed=state.seed, task=Task.from_dict(state.task))
            state.session = uuid.uuid4().hex
            self._live[state.session] = session
        session = self._live.get(state.session)
        if session is None:  # this rollout's episode is over and its env went back to the pool
            return EPISODE_OVER
        text = play(session, name, arguments)
        state.episode = session.episode.to_dict() if session.episode else None
        if session.done:
            self._idle.append(self._live.pop(state.session))
        return text


class SearchgymHarnessConfig(vf.HarnessConfig):
    pass


class SearchgymHarness(vf.Harness[SearchgymHarnessConfig]):
    """The agent loop, in process (see the module docstring)."""

    APPENDS_SYSTEM_PROMPT = True
    SUPPORTS_MCP = True
    EXECUTES_CODE = False
    NEEDS_CONTAINER = False

    async def launch(
        self,
        ctx: Any,
        trace: Any,
        runtime: Any,
        endpoint: str,
        secret: str,
        mcp_urls: dict[str, str],
        data: Any,
        tool_interception_url: str | None = None,
    ) -> Any:
        system, prompt = self.resolve_prompt(data)
        messages: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
        messages.append({"role": "user", "content": prompt})
        timeout = self.config.tool_timeout
        config = {"mcpServers": {name: {"url": url, "timeout": timeout} for name, url in mcp_urls.items()}}
        # no read timeout (a model may think long); a patient connect, as a busy host accepts late
        client = AsyncOpenAI(base_url=endpoint, api_key=secret, timeout=httpx.Timeout(None, connect=60.0))
        async with client, AsyncExitStack() as stack:
            tools, dispatch, servers = await connect_mcp(config, stack)
            while not _over(trace):
                completion = await client.chat.completions.create(
                    model=ctx.model, messages=messages, tools=tools
                )
                message = completion.choices[0].message
                messages.append(message.model_dump(exclude_none=True))
                if not message.tool_calls:
                    break
                for call in message.tool_calls:
                    content = await _run_tool(servers, dispatch, call)
                    messages.append({"role": "tool", "tool_call_id": call.id, "content": content})
        return vf.ProgramResult(exit_code=0, stdout="", stderr="")


def _over(trace: Any) -> bool:
    episode = trace.state.episode
    return episode is not None and (episode["terminated"] or episode["truncated"])


async def _run_tool(servers: Any, dispatch: dict[str, Any], call: Any) -> Any:
    """The tool's result, or the reason it could not run (shown to the model, like a failed call)."""
    name = call.function.name
    if name not in dispatch:
        return f"error: unknown tool {name!r}; the tools are {sorted(dispatch)}"
    try:
        arguments = json.loads(call.function.arguments or "{}")
    except json.JSONDecodeError as e:
        return f"error: the arguments of {name} are not valid JSON ({e})"
    return await call_mcp(servers, dispatch, name, arguments)


class SearchgymTaskset(vf.Taskset[SearchgymTask, SearchgymConfig]):
    """The tasks of a searchgym env (see the module docstring)."""

    def __init__(self, config: SearchgymConfig) -> None:
        super().__init__(config)
        use_env(config.env_id, config.imports, key=IMPORT_KEY)
        session = EnvSession(config.env_id, **config.options)
        self.task_class = _scored_task(reward_weights(session.env))
        self._rows = env_tasks(session, config.n, config.seed)
        session.close()

    def load(self) -> Any:
        for row in self._rows:
            data = SearchgymData(id=row.task.id, prompt=row.prompt, task=row.task.to_dict(), seed=row.seed)
            yield self.task_class(data, self.config.task)

    @classmethod
    def toolsets(cls, config: SearchgymConfig) -> list[Any]:
        shared = {"env_id": config.env_id, "options": config.options, "imports": config.imports}
        return [SearchgymToolset(SearchgymToolsetConfig(**shared, directory=os.getcwd()))]


if __name__ == "__main__":  # verifiers starts the tool server as `python -m <this module>`
    SearchgymToolset.run()
