"""Rewards as one rubric: named, weighted terms, each logged under its name.

A reward is the weighted sum of terms. Each `Term` declares when it is scored:

- ``step`` terms are measured by the env at every step: ``outcome`` (the answer's EM/F1, or
  cover EM), ``format`` (every action well formed) and the costs, which have negative weights:
  ``search_calls`` (calls charged, weight ``-per_search``), ``obs_tokens_1k`` (thousands of
  observation tokens charged, weight ``-per_1k_obs_tokens``) and the planner's ``turns``
  (``-per_turn``). With ``cost_only_if_correct`` the costs are all charged at a correct answer;
- ``episode`` terms are functions of the finished episode, ``fn(episode: EpisodeRecord) -> float``,
  named in ``RewardWeights.terms`` as ``{name: weight}`` where ``name`` is registered
  (`searchgym.register_reward`) or ``module:attr``; `EpisodeTerms` adds them to the step that ends
  the episode (answered or truncated);
- ``trainer`` terms need the policy itself and are scored by the trainer,
  ``fn(episodes, scorer) -> [[value per turn] per episode]``: ``info_gain`` (IGPO), or a user's
  (``searchgym.register_reward(name, fn, level="trainer")``). `searchgym train` weighs them in the
  same ``rewards.terms`` and adds them to the env's rubric (`Rubric.plus`).

An env's `Rubric` is ``env.unwrapped.rubric``; ``info["reward_components"][name]`` is each step or
episode term's value (unweighted). Adapters hand the rubric to other trainers as named, weighted
functions (`Rubric.weights`).

>>> from searchgym.envs.rewards import RewardWeights
>>> rubric = RewardWeights(format=0.2, per_search=0.1).rubric()
>>> rubric.weights()
{'outcome': 1.0, 'format': 0.2, 'search_calls': -0.1, 'obs_tokens_1k': 0.0}
>>> round(rubric.total({"outcome": 1.0, "format": 1.0, "search_calls": 2.0, "obs_tokens_1k": 0.5}), 6)
1.0
>>> from searchgym.tasks.task import Task
>>> episode = EpisodeRecord(Task("t", "q?", ("Paris",), evidence=("d1", "d2")), [{"doc_ids": ["d1", "d9"]}])
>>> evidence_recall(episode)
0.5
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import gymnasium as gym

from searchgym.errors import ConfigError
from searchgym.tasks.task import Task

When = Literal["step", "episode", "trainer"]


@dataclass(frozen=True)
class EpisodeRecord:
    """A finished episode as reward terms see it: the task, every step's ``info`` and action and
    observation, and the final answer (None if the episode was truncated unanswered)."""

    task: Task
    infos: list[dict[str, Any]]
    actions: list[str] = field(default_factory=list)
    observations: list[str] = field(default_factory=list)
    prediction: str | None = None
    truncated: bool = False

    @property
    def n_searches(self) -> int:
        return sum(info.get("tool") == "search" for info in self.infos)

    @property
    def retrieved(self) -> set[str]:
        """Ids of every document a search showed."""
        return {doc_id for info in self.infos for doc_id in info.get("doc_ids") or ()}


RewardFn = Callable[[EpisodeRecord], float]


def evidence_recall(episode: EpisodeRecord) -> float:
    """The share of the task's gold evidence documents that the agent's searches showed it (0 for
    a task without evidence): a dense signal for finding the right passages."""
    evidence = set(episode.task.evidence)
    return len(evidence & episode.retrieved) / len(evidence) if evidence else 0.0


def step_gain(episode: EpisodeRecord) -> float:
    """StepSearch's process reward (Wang et al. 2025, arXiv 2505.15107), summed over the episode's
    searches: each search earns the share of the task's gold passages it showed for the first
    time, less the share of its results that an earlier search, or itself, had already shown (0 for
    a task without evidence).

    Exact on document ids where StepSearch matches texts by TF-IDF, and unscaled (StepSearch
    weighs each step 0.6: weigh the term). Two gold passages; the first search shows one of them,
    the second shows it again and the other, the third only repeats:

    >>> from searchgym.tasks.task import Task
    >>> task = Task("t", "q?", ("a",), evidence=("g1", "g2"))
    >>> infos = [{"tool": "search", "doc_ids": ["g1", "x"]}, {"tool": "search", "doc_ids": ["g1", "g2"]},
    ...          {"tool": "search", "doc_ids": ["x", "x"]}, {"tool": "answer"}]
    >>> step_gain(EpisodeRecord(task, infos))  # (0.5 - 0) + (0.5 - 0.5) + (0 - 1)
    -0.5
    """
    evidence = set(episode.task.evidence)
    if not evidence:
        return 0.0
    seen: set[str] = set()
    total = 0.0
    for info in episode.infos:
        shown = list(info.get("doc_ids") or ()) if info.get("tool") == "search" else []
        if not shown:
            continue
        gained = len(evidence & set(shown) - seen) / len(evidence)
        repeated = 0
        for doc_id in shown:
            repeated += doc_id in seen
            seen.add(doc_id)
        total += gained - repeated / len(shown)
    return total


def citation(episode: EpisodeRecord) -> float:
    """CaRR's citation-aware rubric reward (Zhang et al. 2026, arXiv 2601.06021): for a right
    answer, the share of the gold chain's hops supported by a cited passage that reaches the
    answer unbroken; 0 for a wrong answer, an unanswered episode or a task without evidence.

    Exact where CaRR asks an LLM judge. A hop is supported when the answer cites (env option
    ``citations``) the passage that states it and a search showed that passage; citing a passage
    by its title names the hop's entity, as CaRR requires the answer to. CaRR links supported
    hops from the answer back (a breadth-first search from the answer entity); on a chain that is
    the run of supported hops ending at the last one. C-GRPO as released mixes it as
    ``0.7 outcome + 0.3 R_r`` for a right answer: ``rewards: {outcome: 0.7, terms: {citation: 0.3}}``.
    Two hops, the answer citing only the last hop's passage, then both:

    >>> from searchgym.tasks.task import Task
    >>> task = Task("t", "q?", ("a",), evidence=("g1", "g2"))
    >>> citation(EpisodeRecord(task, [{"tool": "answer", "em": 1.0, "cited_ids": ["g2"]}]))
    0.5
    >>> citation(EpisodeRecord(task, [{"tool": "answer", "em": 1.0, "cited_ids": ["g1", "g2"]}]))
    1.0
    """
    evidence, last = episode.task.evidence, episode.infos[-1] if episode.infos else {}
    if not evidence or last.get("em") != 1.0:
        return 0.0
    cited = set(last.get("cited_ids") or ())
    supported = 0
    for doc_id in reversed(evidence):
        if doc_id not in cited:
            break
        supported += 1
    return supported / len(evidence)


def judge(episode: EpisodeRecord) -> float:
    """ReSeek's reward for judging search results (Li et al. 2025, arXiv 2510.00568), summed over
    the searches an answered episode judged: the action after a search judges its result (env
    option ``judge``), and the result was useful if it showed a gold passage no earlier search had.
    As ReSeek's released rule: a Yes before a right answer earns 0.4; otherwise a right judgement
    0.3 (0.4 with a right answer), a wrong Yes -0.6, a wrong No -0.3; an unjudged result or an
    unanswered episode 0.

    Exact on the gold passages where ReSeek looks for the answer string in the results. A search
    that shows the first gold passage, judged Yes; one that shows nothing new, judged Yes (wrong);
    then a wrong answer:

    >>> from searchgym.tasks.task import Task
    >>> task = Task("t", "q?", ("a",), evidence=("g1", "g2"))
    >>> infos = [{"tool": "search", "doc_ids": ["g1"]},
    ...          {"tool": "search", "doc_ids": ["g1"], "judgement": True},
    ...          {"tool": "answer", "em": 0.0, "judgement": True}]
    >>> round(judge(EpisodeRecord(task, infos, prediction="b")), 6)  # 0.3 - 0.6
    -0.3
    """
    if episode.prediction is None or not episode.infos:
        return 0.0
    right = episode.infos[-1].get("em") == 1.0
    evidence, seen, total = set(episode.task.evidence), set(), 0.0
    for shown, after in zip(episode.infos, episode.infos[1:]):
        if shown.get("tool") != "search":
            continue
        ids = set(shown.get("doc_ids") or ())
        useful, said = bool((ids & evidence) - seen), after.get("judgement")
        seen |= ids
        if said is None:
            continue
        if said and right:
            total += 0.4
        elif said == useful:
            total += 0.3 + 0.1 * right
        else:
            total -= 0.6 if said else 0.3
    return total


@dataclass(frozen=True)
class Term:
    """One named reward term: its weight, when it is scored, for an ``episode`` or ``trainer`` term
    the function that scores it (``step`` terms are measured by the env itself), and what it
    measures in one line (``searchgym list rewards``). A cost has a negative weight."""

    name: str
    weight: float
    when: When = "step"
    fn: Callable[..., Any] | None = None
    doc: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if (self.when == "step") == (self.fn is not None):
            raise ConfigError(
                f"reward term {self.name!r}: episode and trainer terms have a function, step terms "
                "(measured by the env) none"
            )

    @property
    def description(self) -> str:
        """``doc``, else the first sentence of the function's docstring.

        >>> Term("recall", 1.0, "episode", evidence_recall).description[:40]
        "The share of the task's gold evidence do"
        """
        if self.doc or self.fn is None:
            return self.doc
        text = " ".join((inspect.getdoc(self.fn) or "").split())
        return re.split(r"(?<!e\.g)(?<!i\.e)(?<!\bal)\.(?:\s|$)", text)[0]


@dataclass(frozen=True)
class Rubric:
    """The reward terms of an env (and of its trainer), in the order they are summed."""

    terms: tuple[Term, ...]

    def __post_init__(self) -> None:
        names = [t.name for t in self.terms]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ConfigError(f"reward term(s) {repeated} appear twice; each term has one name")

    def plus(self, *terms: Term) -> Rubric:
        """This rubric with ``terms`` added (e.g. the trainer's)."""
        return Rubric((*self.terms, *terms))

    def at(self, when: When | Iterable[When]) -> tuple[Term, ...]:
        """The terms scored ``when`` (a level, or several), in order."""
        levels = (when,) if isinstance(when, str) else tuple(when)
        return tuple(t for t in self.terms if t.when in levels)

    def weight(self, name: str) -> float:
        """The weight of term ``name`` (0 for a term the rubric does not have)."""
        return next((t.weight for t in self.terms if t.name == name), 0.0)

    def weights(self, when: Iterable[When] = ("step", "episode")) -> dict[str, float]:
        """``{name: weight}`` of the terms scored ``when``: an episode's reward is the weighted
        sum of its summed ``reward_components`` (what adapters hand to other trainers)."""
        return {t.name: t.weight for t in self.at(when)}

    def total(self, values: Mapping[str, float], when: When | Iterable[When] = "step") -> float:
        """The weighted sum of ``values`` of the terms scored ``when`` (a level, or several): the
        gains, less `cost`. A step's reward is its step terms' total; with the episode terms, the
        total of the components a step reports is its reward too (as adapters score it)."""
        gains = sum(t.weight * values[t.name] for t in self.at(when) if t.name in values and t.weight >= 0)
        return gains - self.cost(values, when)

    def cost(self, values: Mapping[str, float], when: When | Iterable[When] = "step") -> float:
        """What the ``when`` cost terms (negative weights) of ``values`` charge, as a positive number."""
        return sum(-t.weight * values[t.name] for t in self.at(when) if t.name in values and t.weight < 0)


class EpisodeTerms(gym.Wrapper[str, str, str, str]):
    """Add the rubric's ``episode`` terms to the step that ends an episode: the step's reward gains
    ``weight * fn(episode)`` and ``info["reward_components"][name]`` is ``fn(episode)``."""

    def __init__(self, env: gym.Env[str, str], terms: Iterable[Term]) -> None:
        super().__init__(env)
        self.terms = tuple(terms)
        self._task: Task | None = None
        self._steps: list[tuple[str, str, dict[str, Any]]] = []

    def reset(self, **kwargs: Any) -> tuple[str, dict[str, Any]]:
        observation, info = self.env.reset(**kwargs)
        self._task, self._steps = info["task"], []
        return observation, info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, info = self.env.step(action)
        self._steps.append((action, observation, info))
        if not (terminated or truncated):
            return observation, reward, terminated, truncated, info
        assert self._task is not None
        record = EpisodeRecord(
            self._task,
            [step[2] for step in self._steps],
            [step[0] for step in self._steps],
            [step[1] for step in self._steps],
            prediction=info.get("prediction"),
            truncated=bool(truncated),
        )
        components = dict(info["reward_components"])
        for term in self.terms:
            assert term.fn is not None
            value = float(term.fn(record))
            components[term.name] = value
            reward += term.weight * value
        info["reward_components"] = components
        return observation, reward, terminated, truncated, info


def with_rubric(env: gym.Env[str, str]) -> gym.Env[str, str]:
    """``env`` under `EpisodeTerms` of its rubric's episode terms: ``env`` itself where it has no
    rubric, its rubric no episode terms, or a wrapper of it already adds them (a factory that
    returns a made env, for one)."""
    rubric = getattr(env.unwrapped, "rubric", None)
    terms = rubric.at("episode") if isinstance(rubric, Rubric) else ()
    layer: gym.Env[str, str] = env
    while isinstance(layer, gym.Wrapper):
        if isinstance(layer, EpisodeTerms):
            return env
        layer = layer.env
    return EpisodeTerms(env, terms) if terms else env
