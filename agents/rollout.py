"""Run agents through environments; episodes as dataclasses, saved as JSONL."""

from __future__ import annotations

import json
import os
import re
import sys
import threading
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from statistics import fmean
from typing import Any

import gymnasium as gym
import numpy as np
from tqdm.auto import tqdm

from searchgym.agents.base import Agent
from searchgym.envs.contract import check_reset_info, check_step_info
from searchgym.stats import bootstrap_ci
from searchgym.tasks.task import Task


@dataclass
class Turn:
    """One step of an episode, as the env reported it (fields after ``error`` default, so that
    files written before they existed still load)."""

    action: str
    observation: str
    reward: float
    tool: str | None
    error: str | None
    reward_components: dict[str, float] = field(default_factory=dict)
    obs_tokens: int = 0
    """Tokens of this step's observation that a tool produced (0 for an invalid step)."""
    query: str | None = None
    doc_ids: list[str] | None = None
    """Ids of the documents a search showed."""
    info_gain: float | None = None
    """The turn's information gain (IGPO), when a trainer computed it."""


@dataclass
class Episode:
    task_id: str
    question: str
    answers: list[str]
    metadata: dict[str, Any]
    turns: list[Turn] = field(default_factory=list)
    prediction: str | None = None
    em: float = 0.0
    f1: float = 0.0
    cover_em: float = 0.0
    evidence_recall: float | None = None
    n_searches: int = 0
    n_invalid: int = 0
    n_errors: int = 0
    obs_tokens: int = 0
    total_reward: float = 0.0
    reward_components: dict[str, float] = field(default_factory=dict)
    terminated: bool = False
    truncated: bool = False
    evidence: list[str] = field(default_factory=list)
    """Ids of the task's gold evidence documents."""
    error: str | None = None
    """What ended an agent program's episode besides the env: it raised, ran past its time limit,
    never answered, or sent malformed requests (`searchgym.agents.gateway.programs`)."""
    # the tokens of a policy-backed agent's episode, for training; not saved with the episode
    trajectory: Any = field(default=None, repr=False, compare=False)
    streams: Any = field(default=None, repr=False, compare=False)
    """An agent program's token streams (`searchgym.agents.gateway.records.token_streams`), in
    place of ``trajectory``; not saved with the episode."""

    @property
    def n_turns(self) -> int:
        return len(self.turns)

    def to_dict(self) -> dict[str, Any]:
        row = asdict(self)
        del row["trajectory"], row["streams"]
        return row

    @classmethod
    def from_dict(cls, row: dict[str, Any]) -> Episode:
        row = dict(row)
        row["turns"] = [Turn(**t) for t in row["turns"]]
        return cls(**row)

    @classmethod
    def of(cls, task: Task) -> Episode:
        """A new, empty episode of ``task``."""
        return cls(
            task.id, task.question, list(task.answers), dict(task.metadata), evidence=list(task.evidence)
        )

    def record(
        self,
        action: str,
        observation: str,
        reward: float,
        terminated: bool,
        truncated: bool,
        info: dict[str, Any],
    ) -> None:
        """Add the step that ``action`` played (what ``env.step`` returned, a `StepInfo`): its turn,
        the summed reward and components, the counters and, at the answer, its scores. Every
        adapter that plays an env for another trainer records its episodes with this too."""
        self.turns.append(
            Turn(
                action,
                observation,
                float(reward),
                info["tool"],
                info["error"],
                reward_components=dict(info["reward_components"]),
                obs_tokens=info.get("step_obs_tokens", 0),
                query=info.get("query"),
                doc_ids=info.get("doc_ids"),
            )
        )
        self.total_reward += float(reward)
        for name, value in info["reward_components"].items():
            self.reward_components[name] = self.reward_components.get(name, 0.0) + value
        for name in ("n_searches", "n_invalid", "n_errors", "obs_tokens"):
            setattr(self, name, info[name])
        if "prediction" in info:
            self.prediction = info["prediction"]
            self.em, self.f1, self.cover_em = info["em"], info["f1"], info["cover_em"]
            self.evidence_recall = info["evidence_recall"]
        self.terminated, self.truncated = bool(terminated), bool(truncated)


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


def episode_metrics(episodes: Sequence[Episode]) -> dict[str, float]:
    """The means every report of episodes shows (an unanswered episode scores 0): EM, F1,
    searches, turns, the share of turns that were invalid, and the shares of episodes that were
    truncated and that ended with an error (``Episode.error``: an agent program's failure)."""
    turns = sum(ep.n_turns for ep in episodes)
    return {
        "em": fmean(ep.em for ep in episodes),
        "f1": fmean(ep.f1 for ep in episodes),
        "searches": fmean(ep.n_searches for ep in episodes),
        "turns": fmean(ep.n_turns for ep in episodes),
        "invalid_rate": sum(ep.n_invalid for ep in episodes) / max(turns, 1),
        "truncated": fmean(ep.truncated for ep in episodes),
        "errors": fmean(ep.error is not None for ep in episodes),
    }


_ERROR_FIXES = (
    ("ran past its time limit", "give each episode more time: eval --time-limit SECONDS, or the config key "
     "program_time_limit_s in train"),
    ("ran past its wall-clock limit", "the episode took 10 times its time limit, waits included (a loaded "
     "machine, or a hung generation): raise --time-limit (program_time_limit_s in train)"),
    ("the program raised", "fix the program: each episode's error holds the exception (searchgym view the "
     "run, or read the episodes' JSONL)"),
    ("returned no answer", "make the program return its answer text, or call tools.answer before it returns"),
    ("the program returned a", "make the program return its answer as a string (or None after tools.answer)"),
)  # fmt: skip


_NUMBER_RE = re.compile(r"\d+(?:\.\d+)?")


def error_warning(errors: Sequence[str | None]) -> str | None:
    """A one-line warning when episodes ended with an error (one ``Episode.error`` per episode,
    None for none): how many, the most common error and how to fix it; None if none did, so
    that an evaluation whose episodes all failed never reads as a plain score of zero.

    >>> line = error_warning([None, "the program raised KeyError: 3", "the program raised KeyError: 7"])
    >>> line.split("; ")[0]
    'warning: 2 of 3 episodes ended with an error, scored as the env left them'
    >>> line.split("; ")[1].split(" -> ")[0]
    'most common (2): the program raised KeyError: 3'
    >>> error_warning([None, None]) is None
    True
    """
    failed = [e for e in errors if e is not None]
    if not failed:
        return None
    kinds = Counter(_NUMBER_RE.sub("N", e) for e in failed)  # "waited 3.2 s" and "waited 4 s" alike
    kind, count = kinds.most_common(1)[0]
    common = next(e for e in failed if _NUMBER_RE.sub("N", e) == kind)
    fix = next((fix for cue, fix in _ERROR_FIXES if cue in common), "see each episode's error in the run")
    return (
        f"warning: {len(failed)} of {len(errors)} episodes ended with an error, scored as the env left them; "
        f"most common ({count}): {common[:300]} -> {fix}"
    )


def summarize(episodes: Sequence[Episode]) -> dict[str, float]:
    """`episode_metrics` with cover EM, evidence recall and the mean return, and the 95 %
    bootstrap interval of EM and F1 over the episodes' tasks (``em_low``, ``em_high``,
    ``f1_low``, ``f1_high``)."""
    if not episodes:
        raise ValueError("no episodes to summarize")
    recalls = [ep.evidence_recall for ep in episodes if ep.evidence_recall is not None]
    em_low, em_high = bootstrap_ci([ep.em for ep in episodes])
    f1_low, f1_high = bootstrap_ci([ep.f1 for ep in episodes])
    means = episode_metrics(episodes)
    return {
        "n": len(episodes),
        "em": means.pop("em"),
        "em_low": em_low,
        "em_high": em_high,
        "f1_low": f1_low,
        "f1_high": f1_high,
        "f1": means.pop("f1"),
        "cover_em": fmean(ep.cover_em for ep in episodes),
        **means,
        "evidence_recall": fmean(recalls) if recalls else float("nan"),
        "return": fmean(ep.total_reward for ep in episodes),
    }


def summarize_by(episodes: Sequence[Episode], key: str) -> dict[Any, dict[str, float]]:
    """`summarize` per value of ``metadata[key]`` (episodes without the key are left out)."""
    groups: dict[Any, list[Episode]] = defaultdict(list)
    for ep in episodes:
        if key in ep.metadata:
            groups[ep.metadata[key]].append(ep)
    return {value: summarize(groups[value]) for value in sorted(groups)}


def save_episodes(episodes: Iterable[Episode], path: str | os.PathLike) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for ep in episodes:
            f.write(json.dumps(ep.to_dict(), ensure_ascii=False) + "\n")


def load_episodes(path: str | os.PathLike) -> list[Episode]:
    with Path(path).open(encoding="utf-8") as f:
        return [Episode.from_dict(json.loads(line)) for line in f if line.strip()]
