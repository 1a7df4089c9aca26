"""Thin wrappers, one job each."""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from searchgym.config_types import check_int


class TurnLimit(gym.Wrapper[str, str, str, str]):
    """Truncate an episode after ``max_turns`` steps.

    Unlike Gymnasium's ``TimeLimit``, an answer given on the last allowed turn ends the episode
    as ``terminated`` only: ``terminated`` and ``truncated`` are never both true.
    """

    def __init__(self, env: gym.Env[str, str], max_turns: int) -> None:
        check_int("max_turns", max_turns)
        super().__init__(env)
        self.max_turns = max_turns
        self._turns = 0

    def reset(self, **kwargs: Any) -> tuple[str, dict[str, Any]]:
        self._turns = 0
        return self.env.reset(**kwargs)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, info = self.env.step(action)
        self._turns += 1
        if self._turns >= self.max_turns and not terminated:
            truncated = True
        return observation, reward, terminated, truncated, info
