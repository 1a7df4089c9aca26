"""A searchgym env as an OpenEnv ``Environment``: the env one server session plays, with the
messages of `searchgym.agents.integrations.openenv.messages`.

OpenEnv (PyPI ``openenv``) serves an ``Environment`` over HTTP and WebSocket, one instance per
session, with pydantic messages. `SearchgymEnvironment` plays one `EnvSession`; its ``rubric`` is
the env's rubric as OpenEnv's (`TermsRubric`: one child per reward term, named like it). Its
``reset`` takes ``seed``, ``task_index`` and ``task_id`` (any other option, or one of the wrong
type, raises `BadResetError`, which the server answers with 422); the step of an env with no
episode (OpenEnv's stateless ``POST /step`` makes a fresh env each request) raises
`NoEpisodeError`, which the server answers with 409.
"""

from __future__ import annotations

import importlib.metadata
import threading
from typing import Any

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import EnvironmentMetadata
from openenv.core.rubrics import Rubric, RubricDict

from searchgym.agents.integrations.openenv.messages import (
    RESET_OPTIONS,
    BadResetError,
    NoEpisodeError,
    SearchgymAction,
    SearchgymObservation,
    SearchgymState,
    public_task,
)
from searchgym.agents.play.session import EnvSession, Step
from searchgym.envs import rubric as searchgym_rubric
from searchgym.errors import ConfigError


class TermRubric(Rubric):
    """One term of the env's rubric: its value in a step's ``reward_components``, and its weight."""

    def __init__(self, name: str, weight: float) -> None:
        super().__init__()
        self.name, self.weight = name, weight

    def forward(self, action: Any, observation: Any) -> float:
        return float(observation.reward_components.get(self.name, 0.0))


class TermsRubric(Rubric):
    """The env's rubric (`searchgym.envs.rubric.Rubric`) as an OpenEnv rubric tree: a child per
    step and episode term in ``terms`` (``env.rubric.terms["search_calls"]``; each child's
    ``last_score`` is the term's value at the last step), and a score that is the step's reward,
    the env's rubric's total of their values."""

    def __init__(self, rubric: searchgym_rubric.Rubric) -> None:
        super().__init__()
        self.rubric = rubric
        self.terms = RubricDict({name: TermRubric(name, w) for name, w in rubric.weights().items()})

    def forward(self, action: Any, observation: Any) -> float:
        values = {name: self.terms[name](action, observation) for name in self.terms}
        return self.rubric.total(values, ("step", "episode"))


class SearchgymEnvironment(Environment[SearchgymAction, SearchgymObservation, SearchgymState]):
    """One session's searchgym env (see the module docstring). Sessions share the env's retriever
    (made once per process by `searchgym.make`), never an episode."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(
        self, env_id: str, env_kwargs: dict[str, Any] | None = None, *, reveal_answers: bool = False
    ) -> None:
        session = EnvSession(env_id, **(env_kwargs or {}))
        self.reveal_answers = reveal_answers
        """Whether a reset sends the task whole (gold answers, evidence, metadata) or `public_task`."""
        super().__init__(rubric=TermsRubric(session.env.unwrapped.rubric))
        self.session = session
        self._episode_id: str | None = None
        self.first_text = ""
        """The episode's first observation (its instructions and question)."""
        self.session_id: str | None = None
        """The server's id of this session (set by `searchgym serve-env`'s server)."""
        self._lock = threading.Lock()  # WebSocket steps and MCP tool calls may reach one session

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        task_index: int | None = None,
        task_id: str | None = None,
        **unknown: Any,
    ) -> SearchgymObservation:
        _check_reset(unknown, seed=seed, episode_id=episode_id, task_index=task_index, task_id=task_id)
        with self._lock:
            task = None
            if task_index is not None or task_id is not None:
                try:
                    task = self.session.task(task_index=task_index, task_id=task_id)
                except ConfigError as e:  # a task the env does not have
                    raise BadResetError(str(e)) from None
            text, info = self.session.reset(seed=seed, task=task)
            self._episode_id, self.first_text = episode_id, text
        task = info["task"] if self.reveal_answers else public_task(info["task"])
        return SearchgymObservation(
            text=text, done=False, reward=0.0, metadata={**info, "task": task, "session_id": self.session_id}
        )

    def step(
        self, action: SearchgymAction, timeout_s: float | None = None, **kwargs: Any
    ) -> SearchgymObservation:
        if action.text is not None:
            return self._observe(lambda: self.session.step(action.text))
        return self.call_tool(action.tool, action.arguments)

    def call_tool(self, name: str, arguments: dict[str, Any]) -> SearchgymObservation:
        """One call of the tool ``name`` (what an MCP client's ``tools/call`` plays)."""
        return self._observe(lambda: self.session.call(name, arguments))

    def _observe(self, play) -> SearchgymObservation:
        with self._lock:
            if self.session.episode is None:
                raise NoEpisodeError(
                    "no episode is running in this session: reset first (OpenEnv's stateless POST /step "
                    "plays a fresh env per request; play episodes over the WebSocket /ws or MCP /mcp)"
                )
            if self.session.done:
                raise NoEpisodeError("the episode is over: reset to start another")
            step: Step = play()
        return SearchgymObservation(
            text=step.observation,
            done=step.done,
            reward=step.reward,
            reward_components=step.info.get("reward_components", {}),
            metadata={**step.info, "terminated": step.terminated, "truncated": step.truncated},
        )

    @property
    def state(self) -> SearchgymState:
        episode = self.session.episode
        if episode is None:
            return SearchgymState(env_id=self.session.env_id)
        return SearchgymState(
            episode_id=self._episode_id,
            step_count=episode.n_turns,
            env_id=self.session.env_id,
            task_id=episode.task_id,
            done=self.session.done,
            total_reward=episode.total_reward,
            reward_components=dict(episode.reward_components),
            n_searches=episode.n_searches,
            n_invalid=episode.n_invalid,
            n_errors=episode.n_errors,
            obs_tokens=episode.obs_tokens,
        )

    def get_metadata(self) -> EnvironmentMetadata:
        tools = ", ".join(t.name for t in self.session.tools)
        return EnvironmentMetadata(
            name=self.session.env_id,
            description=f"searchgym env {self.session.env_id}: answer a question with the tools {tools}",
            version=importlib.metadata.version("searchgym"),
        )

    def close(self) -> None:
        self.session.close()


def _check_reset(unknown: dict[str, Any], **options: Any) -> None:
    """`BadResetError` for an option ``reset`` does not take, or one of the wrong type."""
    if unknown:
        raise BadResetError(
            f"reset takes {', '.join(RESET_OPTIONS)}, not {', '.join(map(repr, sorted(unknown)))}"
        )
    for name, value in options.items():
        kind = RESET_OPTIONS[name]
        if value is not None and (not isinstance(value, kind) or isinstance(value, bool)):
            expected = "an integer" if kind is int else "a string"
            raise BadResetError(f"reset's {name} must be {expected}, got {value!r}")
    if options["seed"] is not None and options["seed"] < 0:
        raise BadResetError(f"reset's seed must be at least 0, got {options['seed']}")
