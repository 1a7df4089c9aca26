"""Chat requests as token ids, and replies as OpenAI messages.

A request's messages are rendered by the model's chat template, ``tools`` included. A template
that does not show tools (SmolLM2's) gets them the way Qwen2.5's shows them: a system block that
lists the function schemas and asks for ``<tool_call>{"name": ..., "arguments": ...}</tool_call>``,
and earlier tool calls written that way in the assistant's turns. A reply's ``<tool_call>``
blocks naming a given tool become the message's ``tool_calls`` (the Hermes convention that
Qwen2.5, Hermes and vLLM's ``hermes`` parser use).

**Continuing a conversation from the sampled tokens.** Templating a conversation again would
re-tokenize the model's earlier replies, which need not give the ids it sampled (and a client's
copy of a reply lacks the stop string the model wrote). When a request's messages are an earlier
call's messages followed by the reply the gateway gave (and then anything: tool results, a user
turn), the new prompt is that call's prompt ids, its sampled ids, the template's end of the
assistant turn, and the tokens of what follows; so the model reads exactly what it sampled, and
the calls merge into one token stream (`searchgym.agents.gateway.records`). Where the template
does not append turns that way (it re-renders history), the request is templated afresh.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jinja2

from searchgym.agents.gateway.checks import RequestError, check_json
from searchgym.agents.policies.agent import ChatFormat, renders_tools
from searchgym.generation import Completion

ROLES = ("system", "developer", "user", "assistant", "tool")

TOOLS_SYSTEM = (
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n"
    "<tools>\n{tools}\n</tools>\n\n"
    "For each function call, return a json object with function name and arguments within "
    '<tool_call></tool_call> XML tags:\n<tool_call>\n{{"name": <function-name>, "arguments": '
    "<args-json-object>}}\n</tool_call>"
)
"""Qwen2.5's tool block, for templates that do not show tools."""

TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)


@dataclass(frozen=True)
class ChatTurn:
    """A chat call as later requests may continue it: its normalized messages and tools, the
    reply the client received, and the tokens the model read and sampled."""

    messages: tuple[Any, ...]
    tools_key: str
    reply: Any
    prompt_ids: list[int]
    completion: Completion


def check_messages(messages: Any) -> list[dict[str, Any]]:
    """``messages`` as the template reads them (text content, arguments as objects), or a
    `RequestError` that names the first wrong one."""
    if not isinstance(messages, list) or not messages:
        raise RequestError("messages must be a non-empty list of {role, content} objects", "messages")
    out = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in ROLES:
            raise RequestError(f"messages[{i}] needs a role among {', '.join(ROLES)}", f"messages[{i}]")
        role = "system" if message["role"] == "developer" else message["role"]
        rendered: dict[str, Any] = {"role": role, "content": text_content(message.get("content"), i)}
        if role == "assistant" and message.get("tool_calls"):
            if not isinstance(message["tool_calls"], list):
                raise RequestError(f"messages[{i}].tool_calls must be a list", f"messages[{i}].tool_calls")
            rendered["tool_calls"] = [_tool_call(call, i) for call in message["tool_calls"]]
        for key in ("name", "tool_call_id"):
            if isinstance(message.get(key), str):
                rendered[key] = message[key]
        out.append(rendered)
    return out


def text_content(content: Any, i: int) -> str:
    """A message's text: a string, text parts joined, or "" for none."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(p, dict) and p.get("type") == "text" for p in content):
        return "".join(str(p.get("text", "")) for p in content)
    raise RequestError(
        f"messages[{i}].content must be text (a string or text parts)", f"messages[{i}].content"
    )


def _tool_call(call: Any, i: int) -> dict[str, Any]:
    function = call.get("function") if isinstance(call, dict) else None
    where = f"messages[{i}].tool_calls"
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        raise RequestError(f"{where}: each needs function.name", where)
    arguments = function.get("arguments", {})
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments or "{}")
        except RecursionError:
            raise RequestError(f"{where}: arguments nest too deep", where) from None
        except ValueError:
            pass  # kept as the text the model wrote
        check_json(arguments, f"{where}.arguments")
    return {
        "type": "function",
        "id": call.get("id"),
        "function": {"name": function["name"], "arguments": arguments},
    }


def check_tools(tools: Any) -> list[dict[str, Any]] | None:
    """The request's function tools, or a `RequestError`."""
    if tools is None:
        return None
    ok = isinstance(tools, list) and all(
        isinstance(t, dict)
        and t.get("type") == "function"
        and isinstance(t.get("function"), dict)
        and isinstance(t["function"].get("name"), str)
        for t in tools
    )
    if not ok:
        raise RequestError("tools must be a list of {type: function, function: {name, parameters}}", "tools")
    return tools or None


class ChatPrompter:
    """Requests to prompt ids for one tokenizer's chat template (see the module docstring)."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.format = ChatFormat(tokenizer)  # a ConfigError without a chat template
        self._shows_tools: dict[str, bool] = {}

    def prompt(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, earlier: Sequence[ChatTurn]
    ) -> list[int]:
        """The prompt ids of a request: continued from the latest of ``earlier`` it extends, or
        templated afresh."""
        key = tools_key(tools)
        for turn in reversed(earlier):
            k = len(turn.messages)
            if (
                turn.tools_key == key
                and len(messages) > k
                and normalize(messages[:k]) == turn.messages
                and normalize(messages[k : k + 1])[0] == turn.reply
            ):
                suffix = self._suffix(messages, k + 1, tools)
                if suffix is not None:
                    ended = self.format.close_turn(turn.completion)
                    return turn.prompt_ids + turn.completion.token_ids + ended + suffix
                break
        return self.format.encode(self.render(messages, tools, generation_prompt=True))

    def _suffix(self, messages: list[dict[str, Any]], k: int, tools: Any) -> list[int] | None:
        """The tokens that ``messages[k:]`` and the generation prompt add after the assistant
        turn ``messages[k - 1]``, or None where the template does not append them."""
        before = self.render(messages[:k], tools)
        after = self.render(messages, tools, generation_prompt=True)
        if not (before.endswith(self.format.turn_end) and after.startswith(before)):
            return None
        return self.format.encode(after[len(before) :])

    def render(self, messages: list[dict[str, Any]], tools: Any, generation_prompt: bool = False) -> str:
        if tools and not self._template_shows(tools):
            messages = _with_tools_written(messages, tools)
            tools = None
        try:
            return self.tokenizer.apply_chat_template(
                messages, tools=tools, tokenize=False, add_generation_prompt=generation_prompt
            )
        except jinja2.TemplateError as error:  # the template's own refusal (raise_exception)
            raise RequestError(
                f"the model's chat template refuses these messages: {error}", "messages"
            ) from None

    def _template_shows(self, tools: list[dict[str, Any]]) -> bool:
        key = tools_key(tools)
        if key not in self._shows_tools:
            self._shows_tools[key] = renders_tools(self.tokenizer, tools)
        return self._shows_tools[key]


def _with_tools_written(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` for a template that ignores tools: the tool block in the system message, and
    the assistant's tool calls written into its text."""
    block = TOOLS_SYSTEM.format(tools="\n".join(json.dumps(t) for t in tools))
    out = [dict(m) for m in messages]
    for m in out:
        for call in m.pop("tool_calls", None) or []:
            written = json.dumps(
                {"name": call["function"]["name"], "arguments": call["function"]["arguments"]}
            )
            m["content"] += f"\n<tool_call>\n{written}\n</tool_call>"
    if out[0]["role"] == "system":
        out[0]["content"] = f"{out[0]['content']}\n\n{block}"
    else:
        out.insert(0, {"role": "system", "content": block})
    return out


def reply_message(text: str, tools: list[dict[str, Any]] | None) -> dict[str, Any]:
    """The assistant message of a reply: ``text``, or its content before the first tool call and
    the calls of given tools that parse.

    >>> tools = [{"type": "function", "function": {"name": "search"}}]
    >>> text = 'Let me look.<tool_call>{"name": "search", "arguments": {"query": "x"}}</tool_call>'
    >>> m = reply_message(text, tools)
    >>> m["content"], m["tool_calls"][0]["function"]
    ('Let me look.', {'name': 'search', 'arguments': '{"query": "x"}'})
    """
    names = {t["function"]["name"] for t in tools or []}
    calls = []
    for match in TOOL_CALL.finditer(text) if names else ():
        try:
            call = json.loads(match.group(1))
            check_json(call)  # a call a request could not send back stays text
        except (ValueError, RecursionError):
            continue
        if (
            isinstance(call, dict)
            and call.get("name") in names
            and isinstance(call.get("arguments", {}), dict)
        ):
            arguments = json.dumps(call.get("arguments", {}))
            calls.append(
                {
                    "id": f"call_{uuid.uuid4().hex[:24]}",
                    "type": "function",
                    "function": {"name": call["name"], "arguments": arguments},
                }
            )
    if not calls:
        return {"role": "assistant", "content": text}
    content = text[: text.index("<tool_call>")].strip()
    return {"role": "assistant", "content": content or None, "tool_calls": calls}


def normalize(messages: Sequence[dict[str, Any]]) -> tuple[Any, ...]:
    """Messages as comparable values: role, text, and tool calls by name and arguments (their
    ids, JSON spacing and the whitespace around a text aside: programs often strip a reply)."""
    out = []
    for i, m in enumerate(messages):
        calls = tuple(
            (c["function"]["name"], _canonical(c["function"].get("arguments")))
            for c in m.get("tool_calls") or ()
        )
        out.append((m["role"], text_content(m.get("content"), i).strip(), calls, m.get("tool_call_id")))
    return tuple(out)


def _canonical(arguments: Any) -> str:
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return arguments
    return json.dumps(arguments, sort_keys=True)


def tools_key(tools: Any) -> str:
    return json.dumps(tools, sort_keys=True)
