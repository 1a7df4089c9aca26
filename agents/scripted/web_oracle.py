"""The oracle on the web: it browses to the answer along the gold chain and reads it off a page.

Given a task of the generated world, it searches the chain's first entity, opens that entity's
page from the results (the result whose title is the entity's name), and for each further hop
follows the link in the infobox row of the hop's relation (``Birthplace | Orvo [3]``); on the
last entity's page it answers with the text of the last relation's row. It never reads
``task.answers``, so its exact match measures the site and the env: that every fact a question
asks is on the page the chain leads to, and that the links lead there. Rows on a later part of
a long page are reached by opening the next part. For a mini-wiki task (relation ``subject``)
it searches the masked sentence and answers with the title of the first result's page.
"""

from __future__ import annotations

import re
from typing import Any

from searchgym.envs.protocols import ActionProtocol
from searchgym.envs.web_tools import parse_results
from searchgym.tasks.world.site import fact_label

_PART = re.compile(r"^\[Part (\d+) of (\d+)\. To read part \d+, open (\S+)\]", re.M)
_HEADING = re.compile(r"^# (.+)$", re.M)
_LINK_MARK = re.compile(r"\s*\[(\d+)\]")
_SITE_SUFFIX = re.compile(r" – [^–]+$")


def is_web(protocol: ActionProtocol) -> bool:
    """Whether ``protocol`` browses (has a ``follow`` tool)."""
    return any(t.name == "follow" for t in protocol.tools)


class WebOracleAgent:
    """Browses the gold chain of a task on a web env (see the module docstring)."""

    def reset(self, info: dict[str, Any]) -> None:
        self.protocol: ActionProtocol = info["protocol"]
        self.task = info["task"]
        self.chain = self.task.metadata.get("chain") or []
        self.hop = 0
        self.state = "search"

    def act(self, observation: str) -> str:
        if not self.chain:
            return self._say("This task has no evidence chain to follow.", "answer", "unknown")
        if self.state == "search":
            self.state = "results"
            first = self.chain[0]
            query = first["query"] if first["relation"] == "subject" else first["entity"]
            return self._say(f"I will look up {query}.", "search", query)
        if self.state == "results":
            return self._open_result(observation)
        return self._read_page(observation)

    def _open_result(self, observation: str) -> str:
        results = [(r.title, r.url) for r in parse_results(observation)]
        if not results:
            return self._say("The search found nothing.", "answer", "unknown")
        name = self.chain[0]["entity"]
        url = next((u for t, u in results if _SITE_SUFFIX.sub("", t) == name), results[0][1])
        self.state = "page"
        return self._say(f"The page of {name} should say more.", "open", url)

    def _read_page(self, observation: str) -> str:
        step = self.chain[self.hop]
        if step["relation"] == "subject":
            heading = _HEADING.search(observation)
            return self._say(
                "The page's title names the subject.", "answer", heading.group(1) if heading else "unknown"
            )
        label = fact_label(step["relation"])
        row = re.search(rf"^{re.escape(label)} \| (.+)$", observation, re.M)
        if row is None:
            more = _PART.search(observation)
            if more:
                return self._say(f"The {label} row must be further down.", "open", more.group(3))
            return self._say(f"The page has no {label} row.", "answer", "unknown")
        value = row.group(1)
        if self.hop == len(self.chain) - 1:
            return self._say(f"The page says {label}: {value}.", "answer", _LINK_MARK.sub("", value).strip())
        link = _LINK_MARK.search(value)
        if link is None:
            return self._say(f"The {label} row has no link to follow.", "answer", "unknown")
        self.hop += 1
        return self._say(
            f"{label} is {_LINK_MARK.sub('', value)}; let me follow it.", "follow", link.group(1)
        )

    def _say(self, thought: str, tool: str, value: str) -> str:
        return self.protocol.format_turn(thought, tool, value)
