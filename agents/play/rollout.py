"""Run agents through environments: every env-agent pair kept busy, policy-backed agents' turns
batched into one generation call; episodes recorded as `searchgym.agents.play.episode.Episode`."""

from __future__ import annotations

import sys
import threading
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import gymnasium as gym
import numpy as np
from tqdm.auto import tqdm

from searchgym.agents.base import Agent
from searchgym.agents.play.episode import Episode
from searchgym.envs.contract import check_reset_info, check_step_info
from searchgym.tasks.task import Task


class _Slot:
    """One env-agent pair and the episode it is playing."""

    def __init__(self, env: gym.Env, agent: Agent) -> None:
        self.env, self.agent = env, agent
        self.episode: Episode | None = None
        self.index = -1
        self.observation = ""

    def start(self, index: int, task: Task, seed: int) -> None:
        self.index = index
        self.observation, info = self.env.reset(seed=seed, options={"task": task})
        check_reset_info(info, self.env)
        self.agent.reset(info)
        self.episode = Episode.of(task)

    def apply(self, action: str) -> bool:
        """Play ``action`` as this episode's next turn; True when the episode is over."""
        ep = self.episode
        assert ep is not None
        self.observation, reward, terminated, truncated, info = self.env.step(action)
        check_step_info(info, self.env)
        ep.record(action, self.observation, reward, terminated, truncated, info)
        if terminated or truncated:
            ep.trajectory = getattr(self.agent, "trajectory", None)
        return terminated or truncated


def _act(slots: Sequence[_Slot]) -> list[str]:
    """Every slot's next action. Agents with a ``batch_key`` (policy-backed ones) that share it
    act in one call of their class's ``act_all``; the others act one by one."""
    actions: list[str | None] = [None] * len(slots)
    groups: dict[Any, list[int]] = defaultdict(list)
    for i, slot in enumerate(slots):
        key = getattr(slot.agent, "batch_key", None)
        if key is None:
            actions[i] = slot.agent.act(slot.observation)
        else:
            groups[(type(slot.agent), key)].append(i)
    for (cls, _), members in groups.items():
        done = cls.act_all([slots[i].agent for i in members], [slots[i].observation for i in members])
        for i, action in zip(members, done):
            actions[i] = action
    return actions  # type: ignore[return-value]  (every slot acted)


def rollout(
    envs: Sequence[gym.Env],
    agents: Sequence[Agent],
    tasks: Iterable[Task],
    *,
    seed: int = 0,
    on_turn: Callable[[int], None] | None = None,
) -> Iterator[tuple[int, Episode]]:
    """Play every task once, keeping all env-agent pairs busy; yields ``(task index, episode)``
    as episodes finish, so not necessarily in task order. Task ``i`` is reset with seed
    ``seed + i``. ``on_turn(n)`` is called after each round in which ``n`` episodes acted."""
    if len(envs) != len(agents) or not envs:
        raise ValueError(f"need as many agents as envs (at least one), got {len(envs)} and {len(agents)}")
    queue = iter(enumerate(tasks))
    slots = [_Slot(env, agent) for env, agent in zip(envs, agents)]
    active: list[_Slot] = []
    for slot in slots:
        nxt = next(queue, None)
        if nxt is not None:
            slot.start(nxt[0], nxt[1], seed + nxt[0])
            active.append(slot)
    while active:
        still: list[_Slot] = []
        actions = _act(active)
        if on_turn:
            on_turn(len(actions))
        for slot, action in zip(active, actions):
            if not slot.apply(action):
                still.append(slot)
                continue
            assert slot.episode is not None
            yield slot.index, slot.episode
            nxt = next(queue, None)
            if nxt is not None:
                slot.start(nxt[0], nxt[1], seed + nxt[0])
                still.append(slot)
        active = still


REDRAW_SECONDS = 1.0
"""How often `episode_progress` redraws its bar between updates."""


@contextmanager
def episode_progress(total: int, desc: str, *, disable: bool = False) -> Iterator[dict[str, Callable]]:
    """A progress bar (on stderr) counting finished episodes, with the turns played so far as its
    postfix, so that it moves while long episodes play; yields the ``on_episode`` and ``on_turn``
    keyword arguments of `run_episodes`. The bar is redrawn every `REDRAW_SECONDS`, so that its
    clock runs while a turn takes minutes (a small model's first batched generation on a CPU)."""
    bar = tqdm(total=total, desc=desc, unit="episode", disable=disable, file=sys.stderr)
    with bar, _redrawn(bar, not disable):
        turns = 0

        def on_turn(acted: int) -> None:
            nonlocal turns
            turns += acted
            bar.set_postfix(turns=turns, refresh=True)

        yield {"on_episode": lambda _: bar.update(), "on_turn": on_turn}


@contextmanager
def _redrawn(bar: Any, redraw: bool) -> Iterator[None]:
    """Redraw ``bar`` every `REDRAW_SECONDS` from a daemon thread while inside (when ``redraw``)."""
    if not redraw:
        yield
        return
    stop = threading.Event()

    def run() -> None:
        while not stop.wait(REDRAW_SECONDS):
            bar.refresh()

    thread = threading.Thread(target=run, name="searchgym-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def run_episodes(
    make_env: Callable[[], gym.Env],
    make_agent: Callable[[], Agent],
    tasks: Sequence[Task],
    *,
    n_envs: int = 1,
    seed: int = 0,
    on_episode: Callable[[Episode], None] | None = None,
    on_turn: Callable[[int], None] | None = None,
) -> list[Episode]:
    """Play ``tasks`` with ``n_envs`` env-agent pairs; returns the episodes in task order
    (``on_episode`` is called as each ends, ``on_turn`` as in `rollout`)."""
    envs = [make_env() for _ in range(max(1, min(n_envs, len(tasks))))]
    agents = [make_agent() for _ in envs]
    episodes: list[Episode | None] = [None] * len(tasks)
    try:
        for i, ep in rollout(envs, agents, tasks, seed=seed, on_turn=on_turn):
            episodes[i] = ep
            if on_episode:
                on_episode(ep)
    finally:
        for env in envs:
            env.close()
    return episodes  # type: ignore[return-value]  (every slot is filled)


def sample_tasks(tasks: Sequence[Task], n: int, seed: int) -> list[Task]:
    """The ``min(n, len(tasks))`` tasks that ``searchgym eval --n N --seed S`` plays: drawn without
    replacement with ``seed``, in their order in ``tasks``."""
    picks = np.random.default_rng(seed).choice(len(tasks), size=min(n, len(tasks)), replace=False)
    return [tasks[int(i)] for i in sorted(picks)]
