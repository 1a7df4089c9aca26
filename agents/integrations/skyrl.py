"""Any searchgym env as a skyrl-gym env, for SkyRL's trainer.

SkyRL's generator makes one env per trajectory, ``skyrl_gym.make(env_class, env_config=...,
extras=...)``: ``env_config`` is ``environment.skyrl_gym.<env_class>`` of its config and
``extras`` are the dataset row's columns other than ``prompt`` and ``env_class``, plus
``max_turns`` (the generator's ``generator.max_turns``). It calls ``init(prompt)`` once, then
``step(model_text)`` until ``done``, and asks ``get_metrics()`` at the end.

`SkyRLEnv` plays one searchgym env that way (through `EnvSession`, so retrieval, turn limit,
reward terms and weights are exactly the env's). Registered with `register_skyrl_env` under
``searchgym`` (`ENV_CLASS`), it reads:

- ``env_config``: ``env_id`` (default ``searchgym/FictionalQA-BM25-v0``), ``env_kwargs``, the
  env options ``searchgym eval -E`` takes (``protocol``, ``top_k``, ``rewards``, …), and
  ``imports``, modules of yours to import first, which register your env (an installed package
  with an entry point in the ``searchgym.plugins`` group needs none); any other key is an error;
- ``extras``: ``task`` (a task as JSON, which `skyrl_dataset` writes) or ``task_id`` (one of the
  env's own tasks), an optional reset ``seed``, and ``max_turns``, which becomes the env's turn
  limit as it is for SkyRL's own envs. Other columns (``data_source``, …) are ignored.

``init`` resets the env on the row's task and returns the row's prompt, or the env's first
observation as one user message when the prompt is empty. ``step`` returns the step's reward (the
env's weighted sum of its reward terms), ``done``, the next observation as one user message (the
env's text verbatim, so with ``generator.use_conversation_multi_turn=false`` the token stream is
the Search-R1 one; none once done) and the step's info as ``metadata`` (``reward_components``,
counters, and at the answer ``em``/``f1``). ``get_metrics()`` gives the episode's figures, which
SkyRL averages over episodes into what ``searchgym eval`` reports.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from searchgym.agents.play.episode import Episode, episode_figures
from searchgym.agents.play.session import EnvSession, row_task, task_starts
from searchgym.envs.registry import DEFAULT_ENV
from searchgym.errors import ConfigError, import_optional
from searchgym.registry import use_env
from searchgym.tasks.task import Task

# skyrl-gym is an optional extra: importing this module without it names the extra to install.
_skyrl_gym = import_optional("skyrl_gym", "skyrl")
_base_text_env = import_optional("skyrl_gym.envs.base_text_env", "skyrl")

ENV_CLASS = "searchgym"
ENTRY_POINT = "searchgym.agents.integrations.skyrl:SkyRLEnv"
CONFIG_KEYS = ("env_id", "env_kwargs", "imports")
IMPORT_KEY = f"environment.skyrl_gym.{ENV_CLASS}.imports"


class SkyRLEnv(_base_text_env.BaseTextEnv):
    """One trajectory's searchgym env for SkyRL (see the module docstring). ``episode`` is the
    episode so far, recorded as ``searchgym eval`` records it."""

    def __init__(self, env_config: Mapping[str, Any] | None = None, extras: Mapping[str, Any] | None = None):
        super().__init__()
        env_id, env_kwargs, imports = _read_config(env_config or {})
        use_env(env_id, imports, key=IMPORT_KEY)
        extras = dict(extras or {})
        if extras.get("max_turns") is not None:
            env_kwargs = _with_turn_limit(env_kwargs, int(extras["max_turns"]))
        self.session = EnvSession(env_id, **env_kwargs)
        self.max_turns = int(env_kwargs.get("max_turns", 8))
        self.task = row_task(
            extras,
            lambda task_id: self.session.task(task_id=task_id),
            where=f"a SkyRL dataset row for {self.session.env_id}",
            builder="searchgym.agents.integrations.skyrl.skyrl_dataset()",
        )
        self.seed = None if extras.get("seed") is None else int(extras["seed"])

    @property
    def episode(self) -> Episode | None:
        return self.session.episode

    def init(self, prompt: Sequence[Mapping[str, str]] | None = None) -> tuple[list[dict], dict[str, Any]]:
        """Reset the env on the row's task; the prompt to give the model (the row's, else the env's
        first observation) and the reset info as JSON (``task``, ``protocol``, ``tools``, …)."""
        observation, info = self.session.reset(seed=self.seed, task=self.task)
        self.turns = 0
        chat = [dict(m) for m in prompt] if prompt else [{"role": "user", "content": observation}]
        return chat, info

    def step(self, action: str) -> dict[str, Any]:
        """Play the model's text as the next action: a ``BaseTextEnvStepOutput``."""
        step = self.session.step(action)
        self.turns += 1
        observations = [] if step.done else [{"role": "user", "content": step.observation}]
        return _base_text_env.BaseTextEnvStepOutput(
            observations=observations, reward=step.reward, done=step.done, metadata=step.info
        )

    def get_metrics(self) -> dict[str, float]:
        """The episode's figures: ``em``, ``f1``, ``cover_em``, ``searches``, ``turns``,
        ``invalid``, ``truncated``, ``return`` (summed reward) and each reward term's sum as
        ``reward/<name>``. Averaged over episodes (SkyRL's ``aggregate_metrics``), they are the
        figures of ``searchgym eval``."""
        ep = self.session.episode
        return {} if ep is None else episode_figures(ep)

    def close(self) -> None:
        self.session.close()


def register_skyrl_env(env_class: str = ENV_CLASS) -> str:
    """Register `SkyRLEnv` in skyrl-gym's registry as ``env_class`` (call it in SkyRL's
    entrypoint, where the generator makes envs); registering it again is a no-op. Returns the id."""
    spec = _skyrl_gym.registry.get(env_class)
    if spec is None:
        _skyrl_gym.register(id=env_class, entry_point=ENTRY_POINT)
    elif spec.entry_point not in (ENTRY_POINT, SkyRLEnv):
        raise ConfigError(
            f"skyrl-gym already has an env {env_class!r} ({spec.entry_point}); register searchgym's "
            "under another name: register_skyrl_env('searchgym_qa')"
        )
    return env_class


def skyrl_dataset(
    env: str = DEFAULT_ENV,
    tasks: Sequence[Task] | None = None,
    *,
    seed: int = 0,
    env_class: str = ENV_CLASS,
    **env_kwargs: Any,
) -> list[dict[str, Any]]:
    """One SkyRL dataset row per task (save them as parquet for ``data.train_data``): ``prompt``
    (one user message holding the env's first observation), ``env_class``, ``data_source`` (the
    env id), ``task`` (JSON), ``task_id`` and the reset ``seed`` (``seed + i`` for the i-th task, as
    ``searchgym eval`` seeds it). ``tasks`` default to the env's own, which ``env_kwargs`` (for
    example ``split="train"``) select; give the env the same ``env_kwargs`` in SkyRL's config."""
    session = EnvSession(env, **env_kwargs)
    rows = [
        {
            "prompt": [{"role": "user", "content": start.prompt}],
            "env_class": env_class,
            "data_source": env,
            "task": json.dumps(start.task.to_dict(), ensure_ascii=False),
            "task_id": start.task.id,
            "seed": start.seed,
        }
        for start in task_starts(session, tasks, seed)
    ]
    session.close()
    return rows


def _read_config(config: Mapping[str, Any]) -> tuple[str, dict[str, Any], Any]:
    """``env_id``, ``env_kwargs`` and ``imports`` of ``environment.skyrl_gym.<env_class>`` (an
    omegaconf DictConfig or a dict), as plain Python."""
    if hasattr(config, "_metadata"):  # an omegaconf DictConfig: SkyRL's config
        from omegaconf import OmegaConf  # a dependency of skyrl-gym, needed only for its configs

        config = OmegaConf.to_container(config, resolve=True)
    unknown = sorted(set(config) - set(CONFIG_KEYS))
    if unknown:
        raise ConfigError(
            f"environment.skyrl_gym.{ENV_CLASS} takes only {list(CONFIG_KEYS)}, got {unknown}; env options "
            f"go under env_kwargs (+environment.skyrl_gym.{ENV_CLASS}.env_kwargs.protocol=tags)"
        )
    env_id = config.get("env_id") or DEFAULT_ENV
    env_kwargs = config.get("env_kwargs") or {}
    if not isinstance(env_id, str) or not isinstance(env_kwargs, Mapping):
        raise ConfigError(
            f"env_id must be an env id and env_kwargs a mapping of env options, "
            f"got {env_id!r} and {env_kwargs!r}"
        )
    return env_id, dict(env_kwargs), config.get("imports")


def _with_turn_limit(env_kwargs: dict[str, Any], max_turns: int) -> dict[str, Any]:
    """``env_kwargs`` with SkyRL's ``generator.max_turns`` as the env's turn limit."""
    if env_kwargs.get("max_turns", max_turns) != max_turns:
        raise ConfigError(
            f"env_kwargs.max_turns={env_kwargs['max_turns']} disagrees with SkyRL's generator.max_turns="
            f"{max_turns}, which SkyRL hands every env as its turn limit: set generator.max_turns only"
        )
    return {**env_kwargs, "max_turns": max_turns}


__all__ = ["ENV_CLASS", "SkyRLEnv", "register_skyrl_env", "skyrl_dataset"]
