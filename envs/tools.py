"""Tool definitions and parsed actions.

A `Tool` is defined once; from it the action protocols generate both the instructions the model
reads and the parser that reads the model's output (see `searchgym.envs.protocols`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Param:
    name: str
    description: str
    type: str = "string"


@dataclass(frozen=True)
class Tool:
    """A tool the agent may call. ``example`` is a sample argument shown in instructions."""

    name: str
    description: str
    params: tuple[Param, ...]
    example: str = ""

    def schema(self) -> dict[str, Any]:
        """The OpenAI / Hugging Face function-calling schema of this tool."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": {
                    "type": "object",
                    "properties": {
                        p.name: {"type": p.type, "description": p.description} for p in self.params
                    },
                    "required": [p.name for p in self.params],
                },
            },
        }

    @classmethod
    def from_schema(cls, schema: dict[str, Any]) -> Tool:
        """The tool that `schema` describes (its inverse, for a client that reads schemas).

        >>> Tool.from_schema(SEARCH.schema()) == SEARCH  # the example is not part of the schema
        False
        >>> Tool.from_schema(SEARCH.schema()).params == SEARCH.params
        True
        """
        function = schema["function"]
        properties = function["parameters"]["properties"]
        params = tuple(
            Param(name, p.get("description", ""), p.get("type", "string")) for name, p in properties.items()
        )
        return cls(function["name"], function["description"], params)


SEARCH = Tool(
    "search",
    "Search the knowledge source. The top results are returned.",
    (Param("query", "What to search for: a few keywords or a short question."),),
    example="capital of France",
)
ANSWER = Tool(
    "answer",
    "Give the final answer, as short as possible, without explanation. This ends the episode.",
    (Param("answer", "The final answer."),),
    example="Beijing",
)
CITED_ANSWER = Tool(
    "answer",
    "Give the final answer, as short as possible, then the title of each passage it rests on in square "
    "brackets. This ends the episode.",
    (Param("answer", "The final answer, then [Title] for each passage cited."),),
    example="Beijing [China]",
)
"""The answer tool of an env with ``citations`` (CaRR's citation protocol, `envs.rubric.citation`)."""


def split_citations(text: str) -> tuple[str, list[str]]:
    """A cited answer's answer (the text before its first ``[``) and its cited titles.

    >>> split_citations("Zatira Garick [Merian Jevane (early life)] [Dreisent]")
    ('Zatira Garick', ['Merian Jevane (early life)', 'Dreisent'])
    """
    answer, _, rest = text.partition("[")
    return answer.strip(), [t.strip() for t in re.findall(r"([^\[\]]+)\]", "[" + rest) if t.strip()]


@dataclass(frozen=True)
class ToolCall:
    """A well-formed call. ``extra_calls`` counts further calls in the same turn, which are
    ignored (the first call wins, as in Search-R1)."""

    name: str
    arguments: dict[str, str] = field(hash=False)
    extra_calls: int = 0


@dataclass(frozen=True)
class Invalid:
    """Text that is not a well-formed call; ``reason`` is shown to the agent."""

    reason: str


Action = ToolCall | Invalid
