"""What a request must be before it joins a batch: read within a size limit, JSON of bounded
depth whose text a tokenizer takes, token ids in the model's vocabulary, finite sampling values.
A request that is not is refused alone (`RequestError`, answered in OpenAI's error format), so
one program's bad input never fails the generation call it would have shared with others.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

MAX_BODY_BYTES = 16 * 2**20
MAX_JSON_DEPTH = 64
"""The deepest nesting of arrays and objects a body (or a tool call's arguments) may have."""
SAMPLING_FIELDS = ("temperature", "top_p", "top_k", "min_p", "frequency_penalty", "presence_penalty",
                   "repetition_penalty", "seed")  # fmt: skip


class RequestError(ValueError):
    """A malformed request: what was wrong (``param``: the field), answered with HTTP ``status``
    (400; 413 for a body over the limit, 415 for one that is not JSON)."""

    def __init__(self, message: str, param: str | None = None, status: int = 400) -> None:
        super().__init__(message)
        self.param = param
        self.status = status


async def read_json(request: Request) -> dict[str, Any]:
    """The request's body as a JSON object, read no further than `MAX_BODY_BYTES`."""
    media_type = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if media_type != "application/json":
        raise RequestError(
            f"the request body must be JSON sent with Content-Type: application/json, not {media_type!r}",
            status=415,
        )
    too_large = RequestError(f"the request body is over {MAX_BODY_BYTES} bytes", status=413)
    length = request.headers.get("content-length", "")
    if length.isdigit() and int(length) > MAX_BODY_BYTES:
        raise too_large
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise too_large
        chunks.append(chunk)
    return await run_in_threadpool(parse_json, b"".join(chunks))  # a big body would stall the loop


def parse_json(raw: bytes) -> dict[str, Any]:
    """A body's JSON object, checked by `check_json`.

    >>> parse_json(b'{"metadata": ' + b"[" * 5000 + b"]" * 5000 + b"}")
    Traceback (most recent call last):
    ...
    searchgym.agents.gateway.checks.RequestError: metadata nests deeper than 64 levels
    """
    try:
        body = json.loads(raw)
    except RecursionError:  # deeper than Python's JSON reader goes: find the field by its brackets
        field = _deep_field(raw)
        raise RequestError(
            f"{field or 'the body'} nests deeper than {MAX_JSON_DEPTH} levels", field
        ) from None
    except ValueError as error:
        raise RequestError(f"the request body is not JSON: {error}") from None
    if not isinstance(body, dict):
        raise RequestError("the request body must be a JSON object")
    check_json(body)
    return body


_TOKENS = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}:]')


def _deep_field(raw: bytes) -> str | None:
    """The top-level field of ``raw`` whose brackets first nest deeper than `MAX_JSON_DEPTH`."""
    depth, key, last = 0, None, b""
    for match in _TOKENS.finditer(raw):
        token = match.group()
        if token in (b"[", b"{"):
            depth += 1
            if depth > MAX_JSON_DEPTH:
                return key
        elif token in (b"]", b"}"):
            depth -= 1
        elif token == b":":
            key = last.decode("utf-8", "replace")[1:-1] if depth == 1 else key
        else:
            last = token
    return None


def check_json(value: Any, where: str = "") -> None:
    """Refuse ``value`` (``where`` in the request) if it nests deeper than `MAX_JSON_DEPTH`, holds
    a number that is not finite (Python's JSON reads ``NaN``, ``Infinity`` and ``1e999``) or text
    a tokenizer cannot take (a lone UTF-16 surrogate); ``param`` names where.

    >>> try:
    ...     check_json({"stop": ["a\\ud800"]})
    ... except RequestError as error:
    ...     print(error.param, "|", error)
    stop[0] | stop[0] holds a lone surrogate (\\ud800), not text: send valid Unicode
    """
    stack: list[tuple[Any, str, int]] = [(value, where, 0)]
    while stack:
        item, path, depth = stack.pop()
        if isinstance(item, str):
            _check_text(item, path)
        elif isinstance(item, float) and not math.isfinite(item):
            raise RequestError(f"{path or 'the body'} is {item}; send a finite number", path or None)
        elif isinstance(item, (dict, list)):
            if depth >= MAX_JSON_DEPTH:
                raise RequestError(
                    f"{path or 'the body'} nests deeper than {MAX_JSON_DEPTH} levels", _top(path)
                )
            pairs = item.items() if isinstance(item, dict) else enumerate(item)
            for key, child in pairs:
                if isinstance(key, str):
                    _check_text(key, path)
                    child_path = f"{path}.{key}" if path else key
                else:
                    child_path = f"{path}[{key}]"
                stack.append((child, child_path, depth + 1))


def _check_text(text: str, path: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        bad = text[error.start].encode("unicode_escape").decode()
        raise RequestError(
            f"{path or 'the body'} holds a lone surrogate ({bad}), not text: send valid Unicode",
            path or None,
        ) from None


def _top(path: str) -> str | None:
    """The field a deep ``path`` is under, down to its first index.

    >>> _top("messages[3].tool_calls[0].function"), _top("metadata[0][0]"), _top("")
    ('messages[3]', 'metadata[0]', None)
    """
    head = path.split(".")[0]
    return head[: head.index("]") + 1] if "[" in head else head or None


def check_sampling(body: dict[str, Any], used: bool) -> None:
    """Sampling fields are finite numbers; where the gateway ``used`` them, in range."""
    for name in SAMPLING_FIELDS:
        value = body.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise RequestError(f"{name} must be a finite number, got {value!r}", name)
    if used and body.get("temperature") is not None and body["temperature"] < 0:
        raise RequestError(
            f"temperature must be >= 0 (0 is greedy), got {body['temperature']}", "temperature"
        )
    if used and body.get("top_p") is not None and not 0 < body["top_p"] <= 1:
        raise RequestError(f"top_p must be in (0, 1], got {body['top_p']}", "top_p")


def check_unsupported(body: dict[str, Any]) -> None:
    if body.get("n", 1) != 1:
        raise RequestError("n must be 1: run one request per sample (each is recorded)", "n")
    response_format = body.get("response_format")
    if isinstance(response_format, dict) and response_format.get("type", "text") != "text":
        raise RequestError("response_format must be text: the gateway samples free text", "response_format")
    choice = body.get("tool_choice")
    if choice not in (None, "auto", "none"):
        raise RequestError(
            "tool_choice must be auto or none: the model decides whether to call a tool", "tool_choice"
        )


def single_prompt(prompt: Any, vocab_size: int) -> str | list[int]:
    """A completions request's one prompt: text, or token ids in ``[0, vocab_size)``.

    >>> single_prompt([[5, 7]], 10)
    [5, 7]
    >>> single_prompt([1000000000], 10)
    Traceback (most recent call last):
    ...
    searchgym.agents.gateway.checks.RequestError: prompt[0] is token id 1000000000; the model's ids are 0 to 9
    """
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
        prompt = prompt[0]
    if isinstance(prompt, str) and prompt:
        return prompt
    if not (isinstance(prompt, list) and prompt and all(type(i) is int for i in prompt)):
        raise RequestError("prompt must be one non-empty string or list of token ids", "prompt")
    for i, token_id in enumerate(prompt):
        if not 0 <= token_id < vocab_size:
            raise RequestError(
                f"prompt[{i}] is token id {token_id}; the model's ids are 0 to {vocab_size - 1}", "prompt"
            )
    return list(prompt)
