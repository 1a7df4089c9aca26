"""Any searchgym env as the ``environment_factory`` of trl's ``GRPOTrainer``.

trl (>= 1.16) turns the public methods of an environment class into tools, renders them with the
model's chat template, parses the model's tool calls, runs them, appends their results as tool
messages (masked out of the loss) and scores each finished rollout with ``get_reward()``.
`TrlEnv` is such a class: ``search(query)`` and ``answer(answer)`` write the call in the env's
own action protocol and step the searchgym env with it, so retrieval, turn limits, reward
terms and their weights (the env's rubric: outcome, format, costs) are exactly the env's; ``get_reward()`` is
the episode's summed searchgym reward. `trl_dataset` turns tasks into the rows trl reads: the
env's own first observation (instructions and question) as the prompt, plus the task, which
``reset(**row)`` hands to the env as ``options={"task": ...}``.

The model must make tool calls that trl can parse, so it needs a chat template trl knows
(Qwen2.5's, Qwen3's, Llama 3.1's, …) and the habit of calling tools with it. A Qwen2.5 or Qwen3
instruct model has both. SmolLM2 has neither: warm start it first with ``searchgym train
--config configs/trl_warm_start.yaml``. That is SFT on the oracle agent's episodes under trl's
Qwen2.5 template, which searchgym then renders exactly as trl does (see
`searchgym.agents.policies.agent`). `trl_model` gives the checkpoint to load and checks its
template. docs/trainers/trl.md runs it on a CPU::

    import torch
    from trl import GRPOConfig, GRPOTrainer
    from searchgym.agents import TrlEnv, trl_dataset, trl_model

    env_id = "searchgym/FictionalQA-BM25-v0"
    options = {"hops": [1], "top_k": 2, "max_obs_tokens": 256, "max_turns": 4, "rewards": {"format": 0.1}}
    gpu = torch.cuda.is_available()
    trainer = GRPOTrainer(
        model=trl_model("runs/trl-warm-start"),  # the warm-started SmolLM2
        args=GRPOConfig(
            use_cpu=not gpu,  # trl refuses to start on a CPU-only machine without it
            bf16=gpu,
            num_generations=4,
            per_device_train_batch_size=4,
            max_completion_length=768,
            max_tool_calling_iterations=options["max_turns"],  # the env's turn limit
            ...
        ),
        train_dataset=trl_dataset(env_id, split="train", **options),
        environment_factory=TrlEnv.factory(env_id, **options),
    )
    trainer.train()

Give `trl_dataset` and `TrlEnv.factory` the same env options as the warm start, and set
``max_tool_calling_iterations`` to the env's turn limit (8 for the registered envs unless
``max_turns`` says otherwise). trl keeps sampling after the ``answer`` call until the model stops
calling tools; those later calls do not step the env.

Reward functions passed as ``reward_funcs`` receive the rollouts' `TrlEnv` instances as
``environments``; their ``info`` holds the answer step's ``em``, ``f1`` and counters.

The env must use the ``tool_calls`` protocol (the default here), because trl parses tool calls
through the chat template: a prompt that asked for Search-R1 tags would never yield a call trl
can run. Self-search envs, where the policy writes its own search results, cannot be driven
through tools. A rollout that ends without an ``answer`` call earns what its steps earned (costs
only); calls after the episode is over do not step the env and say so. trl itself catches a call
with unknown arguments and counts it as a tool failure.
"""

from __future__ import annotations

import functools
import json
import os
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gymnasium as gym

from searchgym.agents.play.session import EPISODE_OVER, row_task, tool_message
from searchgym.envs.protocols import ToolCallsProtocol
from searchgym.envs.registry import DEFAULT_ENV, env_takes, make
from searchgym.envs.search_env import SearchEnv
from searchgym.envs.tools import ANSWER, SEARCH, Tool, ToolCall
from searchgym.errors import ConfigError
from searchgym.registry import check_env_id
from searchgym.tasks.task import Task

if TYPE_CHECKING:
    import datasets


def _tool_env(env: str | gym.Env, env_kwargs: dict[str, Any]) -> gym.Env:
    """Make ``env`` (an id) with the ``tool_calls`` protocol unless told otherwise, or check that
    a made env uses it; `ConfigError` for envs trl cannot drive through tool calls."""
    if isinstance(env, str):
        if "protocol" not in env_kwargs and _takes_protocol(env):
            env_kwargs = {**env_kwargs, "protocol": "tool_calls"}
        env = make(env, **env_kwargs)
    elif env_kwargs:
        raise ConfigError(f"env options {sorted(env_kwargs)} apply only when the env is given by id")
    inner = env.unwrapped
    if not isinstance(inner, SearchEnv):
        raise ConfigError(f"the trl adapter drives a SearchEnv, got {type(inner).__name__}")
    if not isinstance(inner.protocol, ToolCallsProtocol):
        name = env.spec.id if env.spec else type(inner).__name__
        raise ConfigError(
            f"{name} uses the {inner.protocol.name!r} protocol, but trl parses tool calls with the chat "
            "template: make the env with protocol='tool_calls' (self-search envs cannot run as tools)"
        )
    return env


def _takes_protocol(env_id: str) -> bool:
    """Whether the registered entry point of ``env_id`` accepts a ``protocol`` option; an id that
    is not registered (after the plug-ins load) is a `ConfigError` that says how to register it."""
    check_env_id(env_id)
    return env_takes(env_id, "protocol")


class TrlEnv:
    """One rollout's searchgym env, with the env's tools as methods for trl's ``GRPOTrainer``.

    trl makes one instance per rollout and reuses it: ``reset(**row)`` starts the row's task,
    each tool call steps the env, ``get_reward()`` sums the episode's rewards. Public attributes
    (not methods, which trl would expose as tools): ``env``, ``task``, ``reward``, ``calls`` (tool
    calls that stepped the env, by name), ``info`` (the last step's info) and ``done``.
    """

    def __init__(self, env: str | gym.Env = DEFAULT_ENV, **env_kwargs: Any) -> None:
        self.env = _tool_env(env, env_kwargs)
        self.protocol: ToolCallsProtocol = self.env.unwrapped.protocol
        self.task: Task | None = None
        self.reward = 0.0
        self.calls: Counter[str] = Counter()
        self.info: dict[str, Any] = {}
        self.done = True
        self._tasks_by_id: dict[str, Task] | None = None

    @classmethod
    def factory(cls, env: str = DEFAULT_ENV, **env_kwargs: Any) -> Callable[[], TrlEnv]:
        """The zero-argument callable trl's ``environment_factory`` takes. The first env is made
        here, so a bad id or option fails before training starts."""
        cls(env, **env_kwargs)
        return functools.partial(cls, env, **env_kwargs)

    def reset(self, task: str | None = None, task_id: str | None = None, **row: Any) -> None:
        """Start the episode of one dataset row: ``task`` is a task as JSON (`trl_dataset` writes
        it), else ``task_id`` names one of the env's own tasks. trl passes every column of the
        row, so the others (``prompt`` first) are ignored. Returns None: the prompt is the row's."""
        row = {**row, "task": task, "task_id": task_id}
        self.task = row_task(row, self._own_task, where="a trl dataset row", builder="trl_dataset()")
        self.env.reset(options={"task": self.task})
        self.reward = 0.0
        self.calls = Counter()
        self.info = {}
        self.done = False

    # The tools return text but carry no return annotation: trl renders each tool's JSON schema
    # from its signature, and "return" would make it differ from the schema searchgym renders.
    def search(self, query: str):
        return self._step(ToolCall(SEARCH.name, {"query": query}))

    def answer(self, answer: str):
        return self._step(ToolCall(ANSWER.name, {"answer": answer}))

    def get_reward(self) -> float:
        """The summed reward of the episode so far (the env's weights)."""
        return self.reward

    # -- helpers (private: trl exposes every public method as a tool) ------------------------
    def _step(self, call: ToolCall) -> str:
        if self.done:
            return EPISODE_OVER
        self.calls[call.name] += 1
        observation, reward, terminated, truncated, self.info = self.env.step(self.protocol.format_call(call))
        self.reward += float(reward)
        self.done = terminated or truncated
        return tool_message(self.protocol, observation, terminated, truncated)

    def _own_task(self, task_id: str) -> Task:
        if self._tasks_by_id is None:
            self._tasks_by_id = {t.id: t for t in self.env.unwrapped.tasks}
        try:
            return self._tasks_by_id[task_id]
        except KeyError:
            raise ConfigError(
                f"task {task_id!r} is not one of the env's {len(self._tasks_by_id)} tasks; "
                "give the row a 'task' column (trl_dataset writes one)"
            ) from None


def _tool_docstring(tool: Tool) -> str:
    """A Google-style docstring, which is what transformers reads a tool's JSON schema from.

    >>> print(_tool_docstring(ANSWER).rstrip())
    Give the final answer, as short as possible, without explanation. This ends the episode.
    <BLANKLINE>
    Args:
        answer: The final answer.
    """
    args = "\n".join(f"    {p.name}: {p.description}" for p in tool.params)
    return f"{tool.description}\n\nArgs:\n{args}\n"


# The tools' descriptions come from the same `Tool` definitions the env's protocol is built from.
TrlEnv.search.__doc__ = _tool_docstring(SEARCH)
TrlEnv.answer.__doc__ = _tool_docstring(ANSWER)


def trl_model(path: str | os.PathLike) -> str:
    """The directory trl's ``GRPOTrainer(model=...)`` should load for ``path``: a model directory
    (a checkpoint of `searchgym train`, or any saved transformers model) or a run directory of
    `searchgym train` (its newest checkpoint). Raises `ConfigError` when ``path`` holds neither, or
    when the model's chat template is not one trl parses tool calls with (warm start it with
    ``chat_template: qwen2_5``, as ``configs/trl_warm_start.yaml`` does)."""
    # lazy: torch, transformers and trl (2 s), which `import searchgym.agents` does not load
    from transformers import AutoTokenizer
    from trl.chat_template_utils import add_response_schema, supports_tool_calling

    from searchgym.agents.train.checkpoint import latest_checkpoint

    given = Path(path)
    how = "run `searchgym train --config configs/trl_warm_start.yaml` to write one"
    if not given.is_dir():
        raise ConfigError(
            f"{given} is not a directory: give a run directory of searchgym train or a checkpoint; {how}"
        )
    weights = [*given.glob("*.safetensors"), *given.glob("pytorch_model*.bin")]
    model = latest_checkpoint(given) or (given if (given / "config.json").is_file() and weights else None)
    if model is None:
        raise ConfigError(f"{given} holds neither a checkpoint of searchgym train nor a saved model; {how}")
    tokenizer = AutoTokenizer.from_pretrained(model)
    parsed = supports_tool_calling(tokenizer)
    if parsed:
        try:
            add_response_schema(tokenizer)
        except ValueError:
            parsed = False
    if not parsed:
        raise ConfigError(
            f"the chat template of {model} has no tool calling that trl parses; warm start the model with "
            "`--set chat_template=qwen2_5` (see configs/trl_warm_start.yaml)"
        )
    return str(model)


def trl_dataset(
    env: str | gym.Env = DEFAULT_ENV, tasks: Sequence[Task] | None = None, **env_kwargs: Any
) -> datasets.Dataset:
    """One row per task for ``GRPOTrainer``: ``prompt`` (one user message holding the env's first
    observation: its instructions and the question), ``task_id`` and ``task`` (the task as JSON,
    so any task set runs on any env over the same corpus). ``tasks`` defaults to the env's own,
    which ``env_kwargs`` (for example ``split="train"``) select."""
    from datasets import Dataset  # a dependency of trl; imported here, as it is slow to import

    env = _tool_env(env, env_kwargs)
    tasks = env.unwrapped.tasks if tasks is None else tasks
    if not tasks:
        raise ConfigError("trl_dataset needs at least one task")
    rows = []
    for task in tasks:
        observation, _ = env.reset(options={"task": task})
        rows.append(
            {
                "prompt": [{"role": "user", "content": observation}],
                "task_id": task.id,
                "task": json.dumps(task.to_dict(), ensure_ascii=False),
            }
        )
    return Dataset.from_list(rows)
