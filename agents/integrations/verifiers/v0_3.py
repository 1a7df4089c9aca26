"""Any searchgym env for verifiers 0.3: the older ``load_environment(**kwargs)`` convention.

``verifiers.load_environment("searchgym", **kwargs)`` imports the module named by the id
(``searchgym``) and calls its ``load_environment(**kwargs)``, which ``searchgym/__init__.py``
forwards here. It returns a `SearchgymEnv`, a verifiers ``MultiTurnEnv`` built from the same parts
as the verifiers 0.4 taskset (`searchgym.agents.integrations.verifiers.shared`):

- its dataset holds the tasks of `env_tasks`, the prompt being the env's first observation; each
  row's ``info`` carries the task and the seed its env is reset with (as JSON);
- its tools are the env's `Tool` definitions; each rollout plays one live `EnvSession` (kept by the
  rollout's ``trajectory_id``), every tool call through `play`, so retrieval, invalid arguments,
  costs, the turn limit and the final answer are the env's. The rollout ends when the env's
  episode is over or the model replies without a tool call; ``state["searchgym_episode"]`` is the
  episode (`Episode.to_dict`), which ``state_columns=["searchgym_episode"]`` saves;
- its `Rubric` has one reward function per reward component of the env, named like it and weighted
  with the env's weight (`reward_weights`), so a rollout's reward is the env's summed episode
  reward; `METRICS` (EM, F1, searches) ride along with weight 0.

With verifiers 0.4 installed this module refuses to load and points to the taskset
(`searchgym.agents.integrations.verifiers.v0_4`), which refuses verifiers 0.3 in turn.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from searchgym.agents.integrations.verifiers.shared import (
    DEFAULT_ENV,
    INSTALL,
    env_tasks,
    episode_components,
    play,
    reward_weights,
)
from searchgym.agents.play.episode import Episode, episode_figures
from searchgym.agents.play.session import EnvSession
from searchgym.errors import ConfigError, DependencyNotInstalled
from searchgym.registry import use_env
from searchgym.tasks.task import Task

LEGACY_INSTALL = 'pip install "verifiers>=0.3,<0.4"'
IMPORT_KEY = "load_environment's imports"

try:
    import verifiers
except ImportError as e:
    raise DependencyNotInstalled(
        f"'verifiers' is not installed; install it with: {INSTALL} (the taskset, verifiers 0.4), or "
        f"{LEGACY_INSTALL} for this load_environment convention"
    ) from e
if tuple(int(part) for part in verifiers.__version__.split(".")[:2]) >= (0, 4):
    raise DependencyNotInstalled(
        f"searchgym.load_environment serves verifiers < 0.4, found {verifiers.__version__}: with "
        "verifiers 0.4 use the searchgym taskset (vf-eval searchgym; see docs/trainers/verifiers.md), "
        f"or install verifiers 0.3 with: {LEGACY_INSTALL}"
    )
import verifiers as vf  # noqa: E402
from datasets import Dataset  # noqa: E402  (a dependency of verifiers)

__all__ = ["METRICS", "SearchgymEnv", "load_environment"]


def _figure(name: str) -> Callable[[Episode], float]:
    return lambda episode: episode_figures(episode)[name]


METRICS: dict[str, Callable[[Episode], float]] = {name: _figure(name) for name in ("em", "f1", "searches")}
"""The rubric's metrics (weight 0) besides the reward components, as ``searchgym eval`` scores them."""


def load_environment(
    env: str = DEFAULT_ENV,
    options: dict[str, Any] | None = None,
    n: int | None = None,
    seed: int = 0,
    imports: Sequence[str] | str = (),
    **kwargs: Any,
) -> SearchgymEnv:
    """The env ``env`` (its id: searchgym's, an installed plug-in's, or one that the modules
    ``imports`` register when imported) made with ``options`` (the keyword arguments of
    ``searchgym.make``: ``split``, ``protocol``, ``max_turns``, ``rewards``, ...), on its tasks or
    the ``n`` that ``searchgym eval --n N --seed SEED`` plays. ``kwargs`` go to verifiers'
    ``MultiTurnEnv`` (``max_turns`` caps the model's replies, ``timeout_seconds``, ...).

    The id is ``env``, not ``env_id``: verifiers' own ``load_environment(env_id, **env_args)``
    binds ``env_id`` to the module it loads (``"searchgym"``), so Python refuses ``env_id=...``
    among the arguments before searchgym is reached."""
    if "env_id" in kwargs:
        raise ConfigError(
            f"name the env with env={kwargs['env_id']!r}, not env_id: verifiers' load_environment(env_id, "
            "**env_args) takes env_id as the module to load ('searchgym')"
        )
    use_env(env, imports, key=IMPORT_KEY)
    return SearchgymEnv(env, dict(options or {}), n, seed, **kwargs)


class SearchgymEnv(vf.MultiTurnEnv):
    """A searchgym env as a verifiers 0.3 multi-turn env (see the module docstring)."""

    def __init__(self, env_id: str, options: dict[str, Any], n: int | None, seed: int, **kwargs: Any) -> None:
        self._make = lambda: EnvSession(env_id, **options)
        session = self._make()
        weights = reward_weights(session.env)
        if clash := sorted(set(weights) & {*METRICS, "num_turns"}):
            raise ConfigError(
                f"the reward term(s) {clash} have the name of a metric of the rubric; register the "
                "reward function under another name (searchgym.register_reward)"
            )
        tool_defs = [tool.schema()["function"] for tool in session.tools]
        rows = [
            {
                "prompt": [{"role": "user", "content": row.prompt}],
                "answer": row.task.answers[0] if row.task.answers else "",
                "info": json.dumps({"searchgym_task": row.task.to_dict(), "seed": row.seed}),
            }
            for row in env_tasks(session, n, seed)
        ]
        self._live: dict[str, EnvSession] = {}
        self._idle = [session]
        rubric = vf.Rubric(funcs=[_component(name) for name in weights], weights=list(weights.values()))
        for name, value in METRICS.items():  # weight 0: logged, not rewarded
            rubric.add_metric(_score(name, value))
        dataset = Dataset.from_list(rows)
        super().__init__(dataset=dataset, eval_dataset=dataset, rubric=rubric, tool_defs=tool_defs, **kwargs)

    async def setup_state(self, state: vf.State) -> vf.State:
        info = state["info"]
        session = self._idle.pop() if self._idle else self._make()
        session.reset(seed=info["seed"], task=Task.from_dict(info["searchgym_task"]))
        self._live[state["trajectory_id"]] = session
        state["searchgym_episode"] = session.episode.to_dict()
        return state

    async def env_response(self, messages: vf.Messages, state: vf.State, **kwargs: Any) -> vf.Messages:
        """Play each tool call of the model's last message in the rollout's env."""
        session = self._live[state["trajectory_id"]]
        replies = [
            vf.ToolMessage(
                role="tool", content=_play(session, call.name, call.arguments), tool_call_id=call.id
            )
            for call in messages[-1].tool_calls or []
        ]
        state["searchgym_episode"] = session.episode.to_dict()
        if session.done:  # answered, or the env's turn limit: the model is not asked again
            state["final_env_response"] = replies
        return replies

    @vf.stop
    async def no_tool_call(self, state: vf.State) -> bool:
        """The model replied without calling a tool (the 0.4 harness stops there too)."""
        trajectory = state["trajectory"]
        return bool(trajectory) and not getattr(trajectory[-1]["completion"][-1], "tool_calls", None)

    @vf.cleanup
    async def release(self, state: vf.State) -> None:
        """The rollout is over: its env goes back to the pool (the episode stays in the state)."""
        session = self._live.pop(state["trajectory_id"], None)
        if session is not None:
            self._idle.append(session)


def _play(session: EnvSession, name: str, arguments: str) -> str:
    """`play` with the model's JSON arguments; what the caller got wrong is shown to the model."""
    try:
        parsed = json.loads(arguments or "{}")
        if not isinstance(parsed, dict):
            raise ValueError(f"the arguments of {name} must be a JSON object, got {arguments!r}")
        return play(session, name, parsed)
    except ValueError as e:  # invalid JSON, an unknown tool or arguments the tool does not take
        return f"error: {e}"


def _score(name: str, value: Callable[[Episode], float]) -> Callable[[vf.State], float]:
    """A rubric function named ``name``: ``value`` of the rollout's episode so far."""

    def score(state: vf.State) -> float:
        return float(value(Episode.from_dict(state["searchgym_episode"])))

    score.__name__ = score.__qualname__ = name
    return score


def _component(name: str) -> Callable[[vf.State], float]:
    """The reward function of one reward component: its sum over the episode."""
    return _score(name, lambda episode: episode_components(episode, [name])[name])
