"""Action protocols: how model text becomes a tool call and how tool output is shown back.

Two protocols are registered (`searchgym.registry.PROTOCOLS`; `searchgym.register_protocol` adds
one), both generated from the same `Tool` definitions:

- ``tags`` (Search-R1): ``<search> query </search>``, ``<answer> text </answer>``; results come
  back inside ``<information>…</information>``.
- ``tool_calls`` (chat-template tool calling, as Qwen2.5 and Hermes emit it):
  ``<tool_call>{"name": "search", "arguments": {"query": "…"}}</tool_call>``; results come back
  inside ``<tool_response>…</tool_response>``.

Parsing rules, shared by both: the first complete call wins and later ones are counted in
``ToolCall.extra_calls``; an unclosed call, a call nested inside another, an unknown tool, a
missing or empty argument, or text longer than ``max_chars`` is `Invalid` with a reason the
agent can read. A tool may take no argument (``<finish></finish>``,
``{"name": "finish", "arguments": {}}``); giving it one is `Invalid`. ``goal`` is the first
sentence of the instructions (default: answer the question).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Sequence

from searchgym.envs.tools import ANSWER, SEARCH, Action, Invalid, Tool, ToolCall
from searchgym.registry import PROTOCOLS

MAX_ACTION_CHARS = 20_000
DEFAULT_GOAL = "Answer the given question."
# Tags escaped in tool output whatever the protocol, so no document imitates an action or a
# result block of either protocol.
ESCAPED_TAGS = (
    "think",
    "search",
    "answer",
    "propose",
    "judge",
    "information",
    "tool_call",
    "tool_response",
    "tools",
)


class ActionProtocol:
    """Shared parts of both protocols. Subclasses define the wire format."""

    name: str
    result_tag: str

    def __init__(
        self,
        tools: Sequence[Tool] = (SEARCH, ANSWER),
        max_chars: int = MAX_ACTION_CHARS,
        goal: str = DEFAULT_GOAL,
    ):
        if not tools:
            raise ValueError("a protocol needs at least one tool")
        names = [t.name for t in tools]
        if len(set(names)) != len(names):
            raise ValueError(f"tool names must be unique, got {names}")
        self.tools = tuple(tools)
        self.max_chars = max_chars
        self.goal = goal
        self._by_name = {t.name: t for t in tools}
        tags = sorted({*ESCAPED_TAGS, *(t.name for t in self.tools)})
        self._tag_re = re.compile(rf"<(/?)({'|'.join(map(re.escape, tags))})\b[^>]*>", re.I)

    # -- what subclasses provide -------------------------------------------------------------
    stop: tuple[str, ...]

    def instructions(self, question: str) -> str:
        raise NotImplementedError

    def format_call(self, call: ToolCall) -> str:
        raise NotImplementedError

    def _parse(self, text: str) -> Action:
        raise NotImplementedError

    # -- shared ------------------------------------------------------------------------------
    def format_turn(self, thought: str | None, tool: str, value: str | None = None) -> str:
        """A whole turn as the scripted agents write it: a ``<think>`` thought (none where
        ``thought`` is None), then one call of ``tool`` with ``value`` as its first parameter (no
        argument for a tool without any)."""
        params = [p.name for t in self.tools if t.name == tool for p in t.params]
        call = self.format_call(ToolCall(tool, {params[0]: value} if params else {}))
        return call if thought is None else f"<think>{thought}</think>\n{call}"

    def parse(self, text: str) -> Action:
        if len(text) > self.max_chars:
            return Invalid(f"the action is {len(text)} characters long; the limit is {self.max_chars}")
        return self._parse(text)

    def format_result(self, text: str) -> str:
        """Wrap tool output for the agent, neutralising any protocol tags inside it so that a
        document can never pose as the agent's own action or end the result block early."""
        return f"\n\n<{self.result_tag}>{self.escape(text)}</{self.result_tag}>\n\n"

    def unwrap_result(self, observation: str) -> str:
        """An observation without its result tags, for chat templates that add their own.

        >>> ToolCallsProtocol().unwrap_result("\\n\\n<tool_response>Doc 1</tool_response>\\n\\n")
        'Doc 1'
        """
        tag = self.result_tag
        return observation.strip().removeprefix(f"<{tag}>").removesuffix(f"</{tag}>").strip()

    def format_error(self, reason: str) -> str:
        raise NotImplementedError

    def escape(self, text: str) -> str:
        """``<answer>`` → ``&lt;answer&gt;`` for every tag this protocol reads or writes.

        >>> TagsProtocol().escape("see <answer>x</answer> and a < b")
        'see &lt;answer&gt;x&lt;/answer&gt; and a < b'
        """
        return self._tag_re.sub(lambda m: m.group(0).replace("<", "&lt;").replace(">", "&gt;"), text)

    def _call(self, name: str, arguments: dict, extra: int) -> Action:
        tool = self._by_name.get(name)
        if tool is None:
            known = ", ".join(self._by_name)
            return Invalid(f"unknown tool {name!r}; the tools are: {known}")
        args = {}
        for p in tool.params:
            value = arguments.get(p.name)
            if not isinstance(value, str) or not value.strip():
                return Invalid(f"{name} needs a non-empty {p.name!r}")
            if self._tag_re.search(value):
                return Invalid(f"the {p.name} of {name} contains a tag; calls cannot be nested")
            args[p.name] = value.strip()
        unknown = sorted(set(arguments) - {p.name for p in tool.params})
        if unknown:
            return Invalid(f"{name} takes no argument(s) {', '.join(map(repr, unknown))}")
        return ToolCall(name, args, extra)


class TagsProtocol(ActionProtocol):
    """Search-R1's tags. A tool takes one argument, written between its tags, or none
    (``<finish></finish>``)."""

    name = "tags"
    result_tag = "information"

    def __init__(
        self,
        tools: Sequence[Tool] = (SEARCH, ANSWER),
        max_chars: int = MAX_ACTION_CHARS,
        goal: str = DEFAULT_GOAL,
    ):
        for t in tools:
            if len(t.params) > 1:
                raise ValueError(
                    f"the tags protocol needs one-argument tools (or tools without arguments); "
                    f"{t.name!r} has {len(t.params)}"
                )
        super().__init__(tools, max_chars, goal)
        names = "|".join(re.escape(t.name) for t in self.tools)
        self._open_re = re.compile(rf"<({names})>")
        self.stop = tuple(f"</{t.name}>" for t in self.tools)

    def instructions(self, question: str) -> str:
        lines = [
            f"{self.goal} Reason inside <think> and </think> first every time "
            "you get new information. Then take exactly one of these actions:",
        ]
        for t in self.tools:
            usage = f"<{t.name}> {t.params[0].name} </{t.name}>" if t.params else f"<{t.name}></{t.name}>"
            lines.append(f"- {usage}: {t.description}")
        lines.append(
            f"Results are returned between <{self.result_tag}> and </{self.result_tag}>. "
            "Take as many steps as you need."
        )
        example = next((t for t in self.tools if t.name == "answer" and t.example), None)
        if example:
            lines.append(f"For example, <answer> {example.example} </answer>.")
        lines.append(f"Question: {question}")
        return "\n".join(lines) + "\n"

    def format_call(self, call: ToolCall) -> str:
        if not call.arguments:
            return f"<{call.name}></{call.name}>"
        (value,) = call.arguments.values()
        return f"<{call.name}> {value} </{call.name}>"

    def format_error(self, reason: str) -> str:
        usage = " ".join(
            f"To {t.name}, I should put the {t.params[0].name} between <{t.name}> and </{t.name}>."
            if t.params
            else f"To {t.name}, I should write <{t.name}></{t.name}>."
            for t in self.tools
        )
        return f"\nMy previous action is invalid: {reason}. {usage} Let me try again.\n"

    def _parse(self, text: str) -> Action:
        calls = complete_calls(text, self._open_re)
        if not calls:
            opened = self._open_re.search(text)
            if opened:
                return Invalid(f"the <{opened.group(1)}> tag is not closed with </{opened.group(1)}>")
            return Invalid("no action found")
        name, argument = calls[0]
        tool = self._by_name[name]
        if not tool.params:
            if argument.strip():
                return Invalid(f"{tool.name} takes no argument; write <{tool.name}></{tool.name}>")
            return self._call(tool.name, {}, len(calls) - 1)
        return self._call(tool.name, {tool.params[0].name: argument}, len(calls) - 1)


class ToolCallsProtocol(ActionProtocol):
    """JSON tool calls between ``<tool_call>`` tags, as Qwen2.5's and Hermes' chat templates
    produce them. ``arguments`` may be an object or a JSON-encoded string (OpenAI style)."""

    name = "tool_calls"
    result_tag = "tool_response"
    stop = ("</tool_call>",)
    _open_re = re.compile(r"<(tool_call)>")

    def instructions(self, question: str) -> str:
        schemas = "\n".join(json.dumps(t.schema(), ensure_ascii=False) for t in self.tools)
        when = "; call `answer` once you know the answer" if "answer" in self._by_name else ""
        return (
            f"{self.goal} You may call the functions below{when}.\n\n"
            "You are provided with function signatures within <tools></tools> XML tags:\n"
            f"<tools>\n{schemas}\n</tools>\n\n"
            "For each function call, return a json object with function name and arguments "
            "within <tool_call></tool_call> XML tags:\n"
            '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>\n\n'
            f"Question: {question}\n"
        )

    def format_call(self, call: ToolCall) -> str:
        body = json.dumps({"name": call.name, "arguments": call.arguments}, ensure_ascii=False)
        return f"<tool_call>\n{body}\n</tool_call>"

    def format_error(self, reason: str) -> str:
        how = 'Call a function as <tool_call>{"name": ..., "arguments": {...}}</tool_call>.'
        return f"\n\n<{self.result_tag}>Error: {self.escape(reason)}. {how}</{self.result_tag}>\n\n"

    def _parse(self, text: str) -> Action:
        calls = complete_calls(text, self._open_re)
        if not calls:
            if "<tool_call>" in text:
                return Invalid("the <tool_call> tag is not closed with </tool_call>")
            return Invalid("no <tool_call> found")
        body = calls[0][1].strip()
        if "<tool_call>" in body:
            return Invalid("calls cannot be nested: a <tool_call> is inside another")
        payload = _loads(body)
        if isinstance(payload, Invalid):
            return Invalid(f"the tool call is not valid JSON ({payload.reason})")
        if not isinstance(payload, dict) or not isinstance(payload.get("name"), str):
            return Invalid('the tool call must be a JSON object with a "name" string')
        arguments = payload.get("arguments", {})
        if isinstance(arguments, str):
            arguments = _loads(arguments)
            if isinstance(arguments, Invalid):
                return Invalid('"arguments" is a string that is not valid JSON')
        if not isinstance(arguments, dict):
            return Invalid('"arguments" must be a JSON object')
        return self._call(payload["name"], arguments, len(calls) - 1)


def complete_calls(text: str, open_re: re.Pattern[str]) -> list[tuple[str, str]]:
    """``(name, body)`` of each complete ``<name>body</name>`` in ``text``, leftmost first and not
    overlapping, where ``open_re`` matches an opening tag and captures its name: what
    ``re.finditer(r"<(name)>(.*?)</\\1>", text, re.S)`` finds, in linear time instead of its
    quadratic time on a long run of opening tags (each would scan to the end for its close).

    >>> complete_calls("<a>1</a> x <a>2</a> <a>3", re.compile(r"<(a)>"))
    [('a', '1'), ('a', '2')]
    >>> complete_calls("<b><a> <b>2</b> </a>", re.compile(r"<(a|b)>"))
    [('b', '<a> <b>2')]
    """
    calls: list[tuple[str, str]] = []
    end, next_close = 0, {}  # name -> where its earliest close after the last search starts (-1: none)
    for opened in open_re.finditer(text):
        if opened.start() < end:
            continue  # inside the previous call
        name = opened.group(1)
        close = next_close.get(name)
        if close is None or -1 < close < opened.end():
            close = next_close[name] = text.find(f"</{name}>", opened.end())
        if close == -1:
            continue  # no close for this name anywhere after: nor for any later opening
        calls.append((name, text[opened.end() : close]))
        end = close + len(name) + 3
    return calls


def _loads(text: str) -> object:
    """``json.loads(text)``, or `Invalid` saying why not: bad JSON, nesting deeper than Python's
    recursion limit, or an integer longer than Python converts (4,300 digits).

    >>> _loads('[[1]]'), _loads('[' * 5000).reason
    ([[1]], 'nested too deeply')
    """
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        return Invalid(e.msg)
    except RecursionError:
        return Invalid("nested too deeply")
    except ValueError as e:  # int() refuses a number over sys.get_int_max_str_digits() digits
        return Invalid(f"a number has more than {sys.get_int_max_str_digits()} digits ({type(e).__name__})")


def make_protocol(
    name: str, tools: Sequence[Tool] = (SEARCH, ANSWER), goal: str = DEFAULT_GOAL
) -> ActionProtocol:
    """The action protocol registered as ``name`` (`searchgym.registry.PROTOCOLS`: ``tags``,
    ``tool_calls`` and those of `searchgym.register_protocol`), or named as ``"module:attr"``,
    over ``tools``; an unknown name suggests the closest.

    >>> make_protocol("tool_calls").format_call(ToolCall("answer", {"answer": "Paris"}))
    '<tool_call>\\n{"name": "answer", "arguments": {"answer": "Paris"}}\\n</tool_call>'
    """
    return PROTOCOLS.make(name, tools, goal=goal)
