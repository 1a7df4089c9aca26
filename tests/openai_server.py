"""A scripted OpenAI-compatible server for tests, on a free loopback port in a background thread.

It answers ``POST /v1/chat/completions`` and ``POST /v1/completions`` the way vLLM does: the
reply text comes from a script, is split into word tokens (each with a log-prob), stops after the
earliest stop string of the request (dropping it from the text, reporting it as ``stop_reason``)
or at ``max_tokens``. It records every request and how many were in flight at once, and can be
told to fail: `fail` queues replies (errors, ``Retry-After`` headers, slow answers) that the
next requests get before the script is consulted. A chat reply may call tools instead: a `Reply`
with ``tool_calls`` (``[(name, arguments), ...]``) answers with an OpenAI ``tool_calls`` message.

    with OpenAIServer(lambda body: "hello") as server:
        policy = OpenAIPolicy("m", base_url=server.url)
"""

from __future__ import annotations

import asyncio
import json
import re
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from searchgym.retrievers.server import ServerThread


@dataclass
class Reply:
    """One answer: ``text`` after ``delay`` seconds, or an error when ``status`` >= 400."""

    text: str = ""
    delay: float = 0.0
    status: int = 200
    message: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    tool_calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    """Function calls ``(name, arguments)`` of a chat reply, after ``text`` (its content, if any)."""


Script = Callable[[dict[str, Any]], "str | Reply"]


def tokens_of(text: str) -> list[str]:
    """The fake tokenizer: words with their leading whitespace (they join back to ``text``)."""
    return re.findall(r"\s*\S+|\s+$", text)


def token_id(token: str) -> int:
    return zlib.crc32(token.encode()) % 50_000


def token_logprob(position: int) -> float:
    return -0.01 * (position + 1)


def echo(body: dict[str, Any]) -> str:
    """Default script: the last message's content, or the prompt's length for token prompts."""
    if "messages" in body:
        return body["messages"][-1]["content"]
    return f"{len(body['prompt'])} tokens"


class OpenAIServer:
    """Answers requests from ``script`` (a function of the request body, or a list of replies
    taken in order). ``report_stop_reason`` False imitates servers that do not say which stop
    string ended a completion."""

    def __init__(self, script: Script | Sequence[str | Reply] = echo, *, report_stop_reason: bool = True):
        if callable(script):
            self.script: Script = script
        else:
            queue = list(script)
            self.script = lambda body: queue.pop(0)
        self.report_stop_reason = report_stop_reason
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.paths: list[str] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._failures: list[Reply] = []
        self._thread = ServerThread(self._app())
        self.url = ""

    def fail(self, *replies: Reply) -> None:
        """The next ``len(replies)`` requests get these replies, whatever the script says."""
        self._failures.extend(replies)

    def __enter__(self) -> OpenAIServer:
        self._thread.__enter__()
        self.url = self._thread.url + "/v1"
        return self

    def __exit__(self, *exc: object) -> None:
        self._thread.__exit__(*exc)

    def _app(self) -> FastAPI:
        app = FastAPI()

        @app.post("/v1/chat/completions")
        async def chat(request: Request) -> JSONResponse:
            return await self._answer(request, chat=True)

        @app.post("/v1/completions")
        async def completions(request: Request) -> JSONResponse:
            return await self._answer(request, chat=False)

        return app

    async def _answer(self, request: Request, *, chat: bool) -> JSONResponse:
        body = await request.json()
        self.requests.append(body)
        self.headers.append(dict(request.headers))
        self.paths.append(request.url.path)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            reply = self._failures.pop(0) if self._failures else self.script(body)
            reply = Reply(reply) if isinstance(reply, str) else reply
            if reply.delay:
                await asyncio.sleep(reply.delay)
            if reply.status >= 400:
                error = {"error": {"message": reply.message, "type": "test_error", "code": reply.status}}
                return JSONResponse(error, status_code=reply.status, headers=reply.headers)
            choice = self._choice(body, reply.text, chat=chat)
            if reply.tool_calls and chat:
                choice["finish_reason"] = "tool_calls"
                choice["message"]["content"] = reply.text or None
                choice["message"]["tool_calls"] = [
                    {
                        "id": f"call_{len(self.requests)}_{i}",
                        "type": "function",
                        "function": {"name": name, "arguments": json.dumps(arguments)},
                    }
                    for i, (name, arguments) in enumerate(reply.tool_calls)
                ]
            return JSONResponse(
                {
                    "id": f"cmpl-{len(self.requests)}",
                    "object": "chat.completion" if chat else "text_completion",
                    "created": 0,
                    "model": body.get("model", ""),
                    "choices": [choice],
                }
            )
        finally:
            self.in_flight -= 1

    def _choice(self, body: dict[str, Any], text: str, *, chat: bool) -> dict[str, Any]:
        """Generate ``text`` as vLLM would under the request's stop strings and max_tokens."""
        tokens = tokens_of(text)
        stop = body.get("stop") or []
        stop = [stop] if isinstance(stop, str) else stop
        ends = [(text.find(s) + len(s), s) for s in stop if s in text]
        stop_reason, finish = None, "stop"
        if ends:
            end, stop_reason = min(ends)
            n, length = 0, 0
            while length < end:
                length += len(tokens[n])
                n += 1
            tokens = tokens[:n]
            text = text[: end - len(stop_reason)]  # vLLM drops the stop string from the text
        elif len(tokens) > body.get("max_tokens", 16):
            tokens = tokens[: body.get("max_tokens", 16)]
            text, finish = "".join(tokens), "length"
        choice: dict[str, Any] = {"index": 0, "finish_reason": finish}
        if self.report_stop_reason:
            choice["stop_reason"] = stop_reason
        ids = [token_id(t) for t in tokens]
        shown = [f"token_id:{i}" for i in ids] if body.get("return_tokens_as_token_ids") else tokens
        if body.get("return_token_ids"):
            choice["token_ids"] = ids
        lps = [token_logprob(i) for i in range(len(tokens))]
        if chat:
            choice["message"] = {"role": "assistant", "content": text}
            content = [{"token": t, "logprob": lp, "top_logprobs": []} for t, lp in zip(shown, lps)]
            choice["logprobs"] = {"content": content} if body.get("logprobs") else None
        else:
            choice["text"] = text
            logprobs = {"tokens": shown, "token_logprobs": lps, "top_logprobs": None}
            choice["logprobs"] = logprobs if body.get("logprobs") is not None else None
        return choice
