"""Scripted baselines: an oracle that follows the gold evidence, a search-once heuristic, and a
random agent. They write actions in the env's own protocol, so they run on every env and their
trajectories can serve as supervised warm-start data. Where the protocol has no ``answer`` tool
(the planner env, whose frozen generator answers), they call the tool without arguments that
ends the episode (``finish``) where they would answer."""

from __future__ import annotations

import re
import warnings
from typing import Any

import numpy as np

from searchgym.agents.scripted.web_oracle import WebOracleAgent, is_web
from searchgym.envs.protocols import ActionProtocol
from searchgym.envs.tools import CITED_ANSWER
from searchgym.envs.web_tools import parse_results
from searchgym.errors import ConfigError
from searchgym.tasks.extractive import extract_answer, parse_docs

_WORD_RE = re.compile(r"\w+")


class _Scripted:
    """Common bookkeeping: the protocol and task of the episode."""

    protocol: ActionProtocol
    think = True
    """Whether a turn starts with its ``<think>`` thought."""

    def reset(self, info: dict[str, Any]) -> None:
        self.protocol = info["protocol"]
        self.task = info["task"]
        self.turn = 0

    def _say(self, thought: str, tool: str, value: str | None = None) -> str:
        return self.protocol.format_turn(thought if self.think else None, tool, value)

    def _conclude(self, thought: str, answer: str) -> str:
        """Answer; where the protocol has no ``answer`` tool, propose ``answer`` as the question
        (the self-play proposer's ``propose``), or else call the first tool that takes no argument
        (the planner env's ``finish``: its generator answers)."""
        names = [t.name for t in self.protocol.tools]
        for tool in ("answer", "propose"):
            if tool in names:
                return self._say(thought, tool, answer)
        stop = next((t.name for t in self.protocol.tools if not t.params), None)
        if stop is None:
            raise ValueError(f"the protocol has no 'answer' tool and no tool without arguments: {names}")
        return self._say(thought, stop)


class OracleAgent(_Scripted):
    """Searches the gold evidence chain hop by hop (``metadata["chain"][i]["query"]`` where the
    task has one, else the question once), then gives the first gold answer.

    With ``p_verify`` > 0 it is a wasteful oracle: in that share of episodes (drawn from
    ``seed``) it searches the question once more before answering, a search that adds nothing.
    Warm-started on it, a policy over-searches, which a cost reward should train away.

    With ``think=False`` it is a terse oracle: its turns are the calls alone, without the
    ``<think>`` thought, which is the same boilerplate every episode ("Step 1: I need to find out
    about ..."). A policy warm-started on it decodes about a third of the tokens an episode
    (about 30 against 86 for a 2-hop question in SmolLM2's tokens), and every token it samples
    in GRPO is a decision: a query or an answer.

    On a web env (a protocol with ``follow``) it browses instead: `WebOracleAgent` follows the
    chain's infobox links and reads the answer off the last page. As Search Self-play's proposer
    (`searchgym.envs.self_play`) it searches the chain of the world question its answer came from
    and proposes that question. Where the env asks for citations it cites each hop's passage."""

    def __init__(self, p_verify: float = 0.0, think: bool = True, seed: int = 0) -> None:
        self.p_verify = p_verify
        self.think = think
        self.rng = np.random.default_rng(seed)

    def reset(self, info: dict[str, Any]) -> None:
        super().reset(info)
        if not self.task.answers:
            raise ConfigError(
                f"the oracle reads a task's gold answers and evidence chain, and task {self.task.id!r} "
                "came without them: a searchgym serve-env server sends them only with --reveal-answers"
            )
        chain = self.task.metadata.get("chain") or []
        self.queries = [hop["query"] for hop in chain if hop.get("query")] or [self.task.question]
        self.verify = self.p_verify > 0 and self.rng.random() < self.p_verify
        self.web = WebOracleAgent() if is_web(self.protocol) else None
        if not chain and self.web is None:
            warnings.warn(  # shown once per process: the message names no task
                "the oracle has tasks without an evidence chain (metadata['chain']): on those it searches "
                "the question once and answers the gold answer, so its EM is 1 by construction and "
                "measures no retrieval",
                UserWarning,
                stacklevel=2,
            )
        if self.web is not None:
            self.web.reset(info)

    def act(self, observation: str) -> str:
        if self.web is not None:
            return self.web.act(observation)
        self.turn += 1
        if self.turn <= len(self.queries):
            query = self.queries[self.turn - 1]
            return self._say(f"Step {self.turn}: I need to find out about {query}.", "search", query)
        if self.verify and self.turn == len(self.queries) + 1:
            return self._say("Let me check the answer once more.", "search", self.task.question)
        # a self-play proposal (envs.self_play): the world's own question for the answer posed
        proposal = self.task.metadata.get("seed_question")
        return self._conclude(
            "I have found everything I need.", proposal or self._cited(self.task.answers[0])
        )

    def _cited(self, answer: str) -> str:
        """``answer``, followed where the env asks for citations (`CITED_ANSWER`) by the title of
        each passage of the gold chain."""
        if CITED_ANSWER not in self.protocol.tools:
            return answer
        titles = [hop["title"] for hop in self.task.metadata.get("chain") or () if hop.get("title")]
        return " ".join([answer, *(f"[{t}]" for t in titles)])


class HeuristicAgent(_Scripted):
    """Searches the question once and answers with a span of the top document (on the web, of
    the top result's title and snippet)."""

    def act(self, observation: str) -> str:
        self.turn += 1
        if self.turn == 1:
            return self._say("Let me search the question.", "search", self.task.question)
        docs = parse_docs(observation) or [(r.title, r.snippet) for r in parse_results(observation)]
        if not docs:
            return self._conclude("Nothing was found.", "unknown")
        title, text = docs[0]
        answer = extract_answer(self.task.question, f"{title}. {text}", title_first=True)
        return self._conclude(f"The top document is about {title}.", answer)


class RandomAgent(_Scripted):
    """Random searches (a few words of the question) and a random answer (a word seen in the
    results), seeded so that runs repeat."""

    def __init__(self, seed: int = 0, p_answer: float = 0.4) -> None:
        self.rng = np.random.default_rng(seed)
        self.p_answer = p_answer

    def reset(self, info: dict[str, Any]) -> None:
        super().reset(info)
        self.seen = _WORD_RE.findall(self.task.question)

    def act(self, observation: str) -> str:
        self.turn += 1
        self.seen += _WORD_RE.findall(" ".join(text for _, text in parse_docs(observation)))
        if self.turn > 1 and self.rng.random() < self.p_answer:
            return self._conclude("I will guess.", str(self.rng.choice(self.seen)))
        words = self.rng.choice(self.seen, size=min(3, len(self.seen)), replace=False)
        return self._say("Let me search something.", "search", " ".join(words))
