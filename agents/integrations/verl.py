"""Any searchgym env in verl: an agent loop (token in, token out) and the env's tools as verl tools.

`SearchgymAgentLoop` (registered in verl as ``searchgym_agent``, `AGENT_NAME`) plays one episode
per dataset row the Search-R1 way: it samples from verl's server manager until one of the env's
stop strings (``</search>``, ``</answer>``; ``</tool_call>``), steps the env with the decoded
text, appends the observation's tokens to the response with mask 0 and samples again, until the
episode is over or the response budget (``rollout.response_length``) is spent. The response keeps
every sampled token (mask 1) with the log-probs the server sampled it with, and the episode's
summed searchgym reward is the trajectory's ``reward_score``, so verl's reward function is not
called; each reward term's sum, ``em``, ``f1`` and ``searches`` are logged (``reward_extra_info``).

`SearchgymTool` is a verl ``BaseTool`` for one of the env's tools (``search``, ``answer``): for
verl's own ``tool_agent`` loop, whose parser reads ``<tool_call>`` JSON (an env with the
``tool_calls`` protocol). The tools of one trajectory step one env; each call's reward is the
env's step reward (verl collects them as ``tool_rewards``), and `tool_reward` is the reward
function that sums them (``custom_reward_function``).

`prepare_verl_data` writes what verl's trainer reads: the parquet datasets (one row per task: the
env's first observation as the prompt, the task and its reset seed in ``extra_info``) and the
agent-loop and tool configs that name this module with the env's id and options.
``configs/verl_search_r1.yaml`` is a GRPO recipe over them (GPU: verl's rollout servers are vLLM
or SGLang).

Rows choose the loop by ``agent_name``. The env options live in the agent-loop config (one env per
loop), the task in each row, so one dataset can drive any env over the same corpus. An env of your
own needs no edit here: an installed package registers it through the ``searchgym.plugins`` entry
points, and a module of yours that registers it when imported is named by ``imports`` in the
agent-loop and tool configs (``prepare_verl_data(..., imports=["mylab"])`` writes it), which verl's
workers import before they make the env.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from uuid import uuid4

from searchgym.agents.play.episode import episode_figures
from searchgym.agents.play.session import EPISODE_OVER, EnvSession, Step, row_task, task_starts, tool_message
from searchgym.envs.registry import DEFAULT_ENV
from searchgym.errors import ConfigError, import_optional
from searchgym.registry import use_env
from searchgym.tasks.task import Task

# verl is an optional extra: importing this module without it names the extra to install.
_agent_loop = import_optional("verl.experimental.agent_loop.agent_loop", "verl")
_base_tool = import_optional("verl.tools.base_tool", "verl")
_schemas = import_optional("verl.tools.schemas", "verl")

AGENT_NAME = "searchgym_agent"


@_agent_loop.register(AGENT_NAME)
class SearchgymAgentLoop(_agent_loop.AgentLoopBase):
    """verl's agent loop over a searchgym env (see the module docstring). ``env_id``,
    ``env_kwargs`` and ``imports`` (modules of yours that register the env) come from the
    agent-loop config (`prepare_verl_data` writes it); verl hands the rest."""

    def __init__(
        self,
        *args: Any,
        env_id: str = DEFAULT_ENV,
        env_kwargs: Mapping[str, Any] | None = None,
        imports: Sequence[str] | str | None = None,
        **kwargs: Any,
    ) -> None:
        kwargs.pop("tools", None)  # verl's tools: this loop steps the env itself
        super().__init__(*args, **kwargs)
        self.env_id, self.env_kwargs = env_id, _plain(env_kwargs or {})
        use_env(env_id, _plain(imports), key="the agent-loop config's imports")
        EnvSession(self.env_id, **self.env_kwargs).close()  # a bad id or option fails here, once
        self.response_length = self.rollout_config.response_length

    async def run(self, sampling_params: dict[str, Any], **row: Any) -> Any:
        session = EnvSession(self.env_id, **self.env_kwargs)
        task, seed = _row_task(session, row.get("extra_info") or {})
        await self.loop.run_in_executor(None, lambda: session.reset(seed=seed, task=task))
        prompt_ids = await self.ct_build_initial_tokens(list(row["raw_prompt"]))
        params = {**sampling_params, "stop": list(session.protocol.stop), "include_stop_str_in_output": True}
        response: list[int] = []
        mask: list[int] = []
        logprobs: list[float] = []
        sampled_logprobs = True
        step_rewards: list[float] = []
        request_id = uuid4().hex
        while not session.done and len(response) < self.response_length:
            output = await self.server_manager.generate(
                request_id=request_id,
                prompt_ids=prompt_ids + response,
                sampling_params={**params, "max_tokens": self.response_length - len(response)},
            )
            sampled_logprobs = sampled_logprobs and output.log_probs is not None
            response += output.token_ids
            mask += [1] * len(output.token_ids)
            logprobs += output.log_probs or [0.0] * len(output.token_ids)
            text = self.tokenizer.decode(output.token_ids, skip_special_tokens=True)
            step: Step = await self.loop.run_in_executor(None, session.step, text)
            step_rewards.append(step.reward)
            if not step.done:
                observation = self.tokenizer.encode(step.observation, add_special_tokens=False)
                response += observation
                mask += [0] * len(observation)
                logprobs += [0.0] * len(observation)
        session.close()
        episode = session.episode
        assert episode is not None  # reset above
        length = self.response_length
        return _agent_loop.AgentLoopOutput(
            prompt_ids=prompt_ids,
            response_ids=response[:length],
            response_mask=mask[:length],
            response_logprobs=logprobs[:length] if sampled_logprobs else None,
            reward_score=episode.total_reward,
            num_turns=2 * episode.n_turns + 1,
            metrics={},
            extra_fields={
                "turn_scores": step_rewards,
                "tool_rewards": [],
                "reward_extra_info": episode_figures(episode),
            },
        )


class SearchgymTool(_base_tool.BaseTool):
    """One of a searchgym env's tools as a verl ``BaseTool``. Its config (the tool config's
    ``config``) takes ``tool`` (``search`` or ``answer``), ``env_id``, ``env_kwargs`` and
    ``imports`` (modules of yours that register the env); the schema defaults to the env's own.
    A trajectory's tools share one env: in verl's ``tool_agent`` loop it lives on the trajectory
    (``agent_data``), else from ``create`` to ``release`` of one instance. ``create_kwargs`` (a
    row's ``tools_kwargs``) give the ``task`` (JSON) and ``seed``."""

    _sessions: dict[str, EnvSession] = {}  # by instance id, for callers without agent_data

    def __init__(self, config: dict, tool_schema: Any = None) -> None:
        config = {"type": "native", "tool": "search", "env_id": DEFAULT_ENV, "env_kwargs": {}, **config}
        unknown = sorted(set(config) - {"type", "tool", "env_id", "env_kwargs", "imports"})
        if unknown:
            raise ConfigError(
                f"SearchgymTool's config takes tool, env_id, env_kwargs and imports, got {unknown}"
            )
        use_env(config["env_id"], _plain(config.get("imports")), key="the tool config's imports")
        probe = EnvSession(config["env_id"], **_plain(config["env_kwargs"]))
        tools = {t.name: t for t in probe.tools}
        probe.close()
        if config["tool"] not in tools:
            raise ConfigError(
                f"{config['env_id']} has no tool {config['tool']!r}; its tools are {sorted(tools)}"
            )
        self._schema = _schemas.OpenAIFunctionToolSchema.model_validate(tools[config["tool"]].schema())
        self._pending: dict[str, dict[str, Any]] = {}
        super().__init__(config, tool_schema)

    def get_openai_tool_schema(self) -> Any:
        return self._schema

    async def create(
        self, instance_id: str | None = None, create_kwargs: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> tuple[str, Any]:
        instance_id = instance_id or uuid4().hex
        self._pending[instance_id] = dict(create_kwargs or kwargs)
        return instance_id, _schemas.ToolResponse()

    async def execute(
        self, instance_id: str, parameters: dict[str, Any], agent_data: Any = None, **kwargs: Any
    ) -> tuple[Any, float, dict]:
        """Call this tool in the trajectory's env: the observation (without its result tags, which
        the chat template adds), the step's reward and its info."""
        session = self._session(instance_id, agent_data)
        if session.done:
            return _schemas.ToolResponse(text=EPISODE_OVER), 0.0, {}
        step = session.call(self.name, parameters)
        text = tool_message(session.protocol, step.observation, step.terminated, step.truncated)
        return _schemas.ToolResponse(text=text), step.reward, step.info

    async def calc_reward(self, instance_id: str, **kwargs: Any) -> float:
        """The episode's summed reward so far."""
        session = self._sessions.get(instance_id)
        return session.episode.total_reward if session and session.episode else 0.0

    async def release(self, instance_id: str, **kwargs: Any) -> None:
        self._pending.pop(instance_id, None)
        session = self._sessions.pop(instance_id, None)
        if session is not None:
            session.close()

    def _session(self, instance_id: str, agent_data: Any) -> EnvSession:
        session = getattr(agent_data, "_searchgym_session", None) or self._sessions.get(instance_id)
        if session is None:
            session = EnvSession(self.config["env_id"], **_plain(self.config["env_kwargs"]))
            task, seed = _row_task(session, self._pending.get(instance_id, {}))
            session.reset(seed=seed, task=task)
            if agent_data is not None:
                agent_data._searchgym_session = session  # lives as long as the trajectory
            else:
                self._sessions[instance_id] = session
        return session


def tool_reward(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: Mapping[str, Any] | None = None,
    **_: Any,
) -> float:
    """verl's ``custom_reward_function`` for the ``tool_agent`` loop: the summed rewards of the
    trajectory's searchgym tool calls (the env's own reward), which verl hands as ``tool_rewards``.

    >>> tool_reward("searchgym", "...", ["Breloria"], {"tool_rewards": [0.0, 1.0]})
    1.0
    """
    return float(sum((extra_info or {}).get("tool_rewards") or []))


def verl_rows(
    env: str = DEFAULT_ENV,
    tasks: Sequence[Task] | None = None,
    *,
    seed: int = 0,
    agent_name: str = AGENT_NAME,
    **env_kwargs: Any,
) -> list[dict[str, Any]]:
    """One verl dataset row per task: ``prompt`` (the env's first observation as a user message),
    ``agent_name``, ``data_source`` (the env id), ``reward_model`` (the gold answers) and
    ``extra_info`` (``index``, ``task`` as JSON, the reset ``seed`` ``seed + i`` as ``searchgym
    eval`` seeds task i, and the same as ``tools_kwargs`` for `SearchgymTool`)."""
    session = EnvSession(env, **env_kwargs)
    rows = []
    for i, start in enumerate(task_starts(session, tasks, seed)):
        where = {"task": json.dumps(start.task.to_dict(), ensure_ascii=False), "seed": start.seed}
        tools_kwargs = {tool.name: {"create_kwargs": where} for tool in session.tools}
        rows.append(
            {
                "data_source": env,
                "prompt": [{"role": "user", "content": start.prompt}],
                "agent_name": agent_name,
                "reward_model": {"style": "rule", "ground_truth": list(start.task.answers)},
                "extra_info": {"index": i, **where, "tools_kwargs": tools_kwargs},
            }
        )
    session.close()
    return rows


def prepare_verl_data(
    out: str | os.PathLike,
    env: str = DEFAULT_ENV,
    *,
    seed: int = 0,
    imports: Sequence[str] = (),
    **env_kwargs: Any,
) -> dict[str, Path]:
    """Write what verl's trainer reads for ``env`` (made with ``env_kwargs``) into ``out``:
    ``train.parquet`` and ``dev.parquet`` (`verl_rows` of the env's train and dev tasks),
    ``agent_loops.yaml`` (``rollout.agent.agent_loop_config_path``) and ``tools.yaml``
    (``rollout.multi_turn.tool_config_path``, for the ``tool_agent`` loop). Returns the paths.
    ``imports`` are modules of yours that register ``env`` when imported: imported here, and
    written into both configs, so that verl's workers import them too."""
    from datasets import Dataset  # a dependency of verl and trl; slow to import

    imports = [imports] if isinstance(imports, str) else list(imports)
    use_env(env, imports, key="prepare_verl_data's imports")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    options = {k: v for k, v in env_kwargs.items() if k != "split"}
    paths = {}
    for split in ("train", "dev"):
        paths[split] = out / f"{split}.parquet"
        Dataset.from_list(verl_rows(env, seed=seed, split=split, **options)).to_parquet(paths[split])
    loop = {
        "name": AGENT_NAME,
        "_target_": f"{__name__}.SearchgymAgentLoop",
        "env_id": env,
        "env_kwargs": options,
        **({"imports": imports} if imports else {}),
    }
    paths["agent_loops"] = out / "agent_loops.yaml"
    paths["agent_loops"].write_text(json.dumps([loop], indent=2) + "\n")  # JSON is YAML
    probe = EnvSession(env, **options)
    tools = [
        {
            "class_name": f"{__name__}.SearchgymTool",
            "config": {
                "type": "native",
                "tool": tool.name,
                "env_id": env,
                "env_kwargs": options,
                **({"imports": imports} if imports else {}),
            },
        }
        for tool in probe.tools
    ]
    probe.close()
    paths["tools"] = out / "tools.yaml"
    paths["tools"].write_text(json.dumps({"tools": tools}, indent=2) + "\n")
    return paths


def _row_task(session: EnvSession, where: Mapping[str, Any]) -> tuple[Task, int | None]:
    """The task (``task`` JSON or ``task_id``) and reset seed of a row's ``extra_info``."""
    task = row_task(
        where,
        lambda task_id: session.task(task_id=task_id),
        where=f"a verl row for {session.env_id}",
        builder="searchgym.agents.integrations.verl.verl_rows()",
        needs="extra_info.task (JSON) or extra_info.task_id",
    )
    seed = where.get("seed")
    return task, None if seed is None else int(seed)


def _plain(value: Any) -> Any:
    """An omegaconf container (verl's configs) as plain Python; anything else as is."""
    if hasattr(value, "_metadata"):
        from omegaconf import OmegaConf  # a dependency of verl, needed only for its configs

        return OmegaConf.to_container(value, resolve=True)
    return dict(value) if isinstance(value, Mapping) else value


__all__ = [
    "AGENT_NAME",
    "SearchgymAgentLoop",
    "SearchgymTool",
    "prepare_verl_data",
    "tool_reward",
    "verl_rows",
]
