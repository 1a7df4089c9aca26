"""The messages of searchgym's OpenEnv env: what a client sends and reads, as pydantic models.

- `SearchgymAction`: either ``text`` (raw model text, parsed by the env's own action protocol,
  for trainers that send what the model wrote) or ``tool`` with ``arguments`` (a structured call
  of one of the env's tools: ``{"tool": "search", "arguments": {"query": "..."}}``).
- `SearchgymObservation`: the observation ``text``, the step's ``reward``, ``done``, the step's
  ``reward_components`` and the env's ``info`` (as JSON; at reset it also holds the task, the
  tools' schemas and the server's ``session_id``) in ``metadata``. The task is its ``id`` and
  ``question`` only (`public_task`) unless the env is made with ``reveal_answers=True``: its gold
  answers, evidence and metadata (the reasoning chain) give the answer away.
- `SearchgymState`: the episode so far (task, turn, summed reward and components, counters).

A reset takes the `RESET_OPTIONS`; the errors a session raises (`NoEpisodeError`,
`BadResetError`) are the server's 409 and 422.
"""

from __future__ import annotations

from typing import Any

from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field, model_validator
from pydantic_core import PydanticCustomError


class NoEpisodeError(RuntimeError):
    """A step was sent to a session with no episode running (never reset, or over)."""


class BadResetError(ValueError):
    """A reset asked for an option the env does not take, or gave one of the wrong type."""


RESET_OPTIONS = {"seed": int, "episode_id": str, "task_index": int, "task_id": str}
"""What ``reset`` takes, and the type of each."""


def public_task(task: dict[str, Any]) -> dict[str, Any]:
    """What a client may see of a task (a `Task`'s dict): its id and question.

    >>> public_task({"id": "t", "question": "Q?", "answers": ["A"], "evidence": ["d1"], "metadata": {}})
    {'id': 't', 'question': 'Q?'}
    """
    return {"id": task["id"], "question": task["question"]}


class SearchgymAction(Action):
    """One action: raw ``text`` in the env's protocol, or a ``tool`` call with its ``arguments``."""

    text: str | None = Field(default=None, description="the model's text, parsed by the env's protocol")
    tool: str | None = Field(default=None, description="a tool of the env (search, answer, open, ...)")
    arguments: dict[str, str] = Field(default_factory=dict, description="the tool's arguments")

    @model_validator(mode="after")
    def _one_kind(self) -> SearchgymAction:
        if (self.text is None) == (self.tool is None):
            raise PydanticCustomError(
                "searchgym_action", 'give either "text" (the model\'s text) or "tool" with "arguments"'
            )
        if self.text is not None and self.arguments:
            raise PydanticCustomError("searchgym_action", '"arguments" go with "tool", not with "text"')
        return self


class SearchgymObservation(Observation):
    """What the agent is shown, with the step's reward terms; ``metadata`` holds the env's info."""

    text: str = Field(description="the observation: instructions and question at reset, then tool results")
    reward_components: dict[str, float] = Field(
        default_factory=dict, description="each reward term's value at this step"
    )


class SearchgymState(State):
    """The episode so far."""

    env_id: str = ""
    task_id: str | None = None
    done: bool = True
    total_reward: float = 0.0
    reward_components: dict[str, float] = Field(default_factory=dict)
    n_searches: int = 0
    n_invalid: int = 0
    n_errors: int = 0
    obs_tokens: int = 0
