"""`Gateway`: an OpenAI-compatible server in front of a searchgym policy that records every token.

Routes: ``POST /v1/chat/completions`` and ``POST /v1/completions`` (non-streaming, and
``stream: true`` as server-sent events), ``GET /v1/models``, ``GET /health``.

Each episode gets its own API key (`open_episode`); a request is recorded in the episode of the
key it carries, so many programs play at once through one server, their requests batched into
one generation call (`Batcher`). Every call records the prompt's token ids, the sampled ids and
their sampling log-probs (`records.Call`): the text a client receives is decoded from those ids
(less a stop string, which OpenAI's API leaves out), and nothing is re-tokenized; a later call
that continues the conversation is built from them (`chat`). ``logprobs: true`` returns the
log-probs, and vLLM's ``return_token_ids: true`` the prompt's and the completion's ids.

Sampling: ``max_tokens`` (capped at the episode's ``max_new_tokens``) and ``stop`` come from the
request; temperature and top-p are the episode's (the trainer's, whose loss must score the tokens
at the temperature they were sampled at), unless the gateway is told to take them from requests
(``searchgym gateway``). Generation is not incremental: a stream sends the completion once sampled.

A malformed request is refused before it joins a batch (`checks`: 400 in OpenAI's error format,
413 for a body over 16 MB, 415 for one not sent as JSON) and noted in its episode's log; a request
the model still fails on is answered 500 alone, the others of its batch generated without it
(`Batcher`). Served by `Gateway` itself, only requests for a loopback name are answered.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import threading
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from searchgym.agents.gateway.batcher import Batcher
from searchgym.agents.gateway.chat import (
    ChatPrompter,
    ChatTurn,
    check_messages,
    check_tools,
    normalize,
    reply_message,
    tools_key,
)
from searchgym.agents.gateway.checks import (
    RequestError,
    check_sampling,
    check_unsupported,
    read_json,
    single_prompt,
)
from searchgym.agents.gateway.records import Call, EpisodeLog, token_streams
from searchgym.agents.play.programs import EndedEpisode
from searchgym.errors import ConfigError
from searchgym.generation import Completion, SamplingParams
from searchgym.serving import ServerThread, loopback_guard

log = logging.getLogger(__name__)


class AuthError(Exception):
    """A request whose key names no open episode (HTTP 401)."""


class GenerationError(Exception):
    """The model failed on one request (HTTP 500; the other requests of its batch are answered)."""


@dataclass
class _Episode:
    log: EpisodeLog
    params: SamplingParams
    chats: list[ChatTurn] = field(default_factory=list)
    texts: list[tuple[str, list[int], Completion]] = field(default_factory=list)
    """Completions-endpoint calls: the prompt text and the full text the model wrote after it,
    the prompt ids and the completion."""


class Gateway:
    """The gateway for ``policy`` (a `TokenizedPolicy` with a chat template); ``params`` are the
    default sampling of an episode. ``open_keys``: any key is an episode of its own, opened on
    its first request (``searchgym gateway``); otherwise keys come from `open_episode`.
    ``record``: a JSONL file every call is appended to. Use as a context manager to serve it on
    a free loopback port (``url``), or mount ``app`` in a server of your own."""

    def __init__(
        self,
        policy: Any,
        params: SamplingParams,
        *,
        name: str | None = None,
        window_s: float = 0.02,
        open_keys: bool = False,
        sampling_from_requests: bool = False,
        record: Path | None = None,
    ) -> None:
        self.policy = policy
        self.params = params
        self.name = name or policy.name
        self.open_keys = open_keys
        self.sampling_from_requests = sampling_from_requests
        self.prompter = ChatPrompter(policy.tokenizer)
        config = getattr(getattr(policy, "model", None), "config", None)
        self.context: int | None = getattr(config, "max_position_embeddings", None)
        """The most tokens the model reads (prompt and completion), where its config says."""
        sizes = [len(policy.tokenizer), getattr(config, "vocab_size", None)]
        self.vocab_size: int = min(n for n in sizes if n)
        """Token ids a prompt may hold are below this: the model embeds them and the tokenizer
        decodes them."""
        self._episodes: dict[str, _Episode] = {}
        self._lock = threading.Lock()
        self._record = record.open("a", encoding="utf-8") if record else None
        self.batcher = Batcher(policy, window_s=window_s, ready=self._all_waiting)
        self.app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._chat, methods=["POST"]),
                Route("/v1/completions", self._completions, methods=["POST"]),
                Route("/v1/models", self._models, methods=["GET"]),
                Route("/health", lambda request: JSONResponse({"status": "ok"}), methods=["GET"]),
            ]
        )
        self.url = ""
        self._server: ServerThread | None = None

    # -- episodes

    def open_episode(self, name: str, params: SamplingParams | None = None) -> str:
        """A new episode's API key; its calls sample with ``params`` (default: the gateway's)."""
        key = f"sg-{secrets.token_urlsafe(24)}"
        with self._lock:
            self._episodes[key] = _Episode(EpisodeLog(name), params or self.params)
        return key

    def close_episode(self, key: str) -> EpisodeLog:
        """End the episode of ``key`` (its requests are refused from now on); its log."""
        with self._lock:
            return self._episodes.pop(key).log

    def end_episode(self, key: str) -> EndedEpisode:
        """`close_episode`, its calls as token streams, and the keys and values the policy kept
        of them freed (`searchgym.agents.play.programs.ModelEndpoint`)."""
        log = self.close_episode(key)
        streams = token_streams(log.calls)
        with self.batcher.lock:
            for stream in streams:
                self.policy.forget(stream.prompt_ids + stream.ids)
        return EndedEpisode(streams, log.errors)

    def reseed(self, seed: int) -> None:
        """Seed the policy's sampling, between two generation calls."""
        with self.batcher.lock:
            self.policy.reseed(seed)

    def waited_s(self, key: str) -> float:
        """Seconds so far in which a request of the episode of ``key`` waited for the model
        (queued for a batch, or being generated), concurrent requests counted once."""
        with self._lock:
            return self._episodes[key].log.waits.seconds()

    def _all_waiting(self, n_waiting: int) -> bool:
        """Whether ``n_waiting`` requests are all that the open episodes can send now."""
        with self._lock:
            return not self.open_keys and n_waiting >= len(self._episodes)

    def _episode(self, request: Request) -> _Episode:
        header = request.headers.get("authorization", "")
        key = header[7:].strip() if header.lower().startswith("bearer ") else ""
        with self._lock:
            episode = self._episodes.get(key)
            if episode is None and self.open_keys:
                episode = self._episodes[key] = _Episode(EpisodeLog(key or "anonymous"), self.params)
        if episode is None:
            raise AuthError("this API key names no open episode (it ended, or was never given)")
        return episode

    # -- serving

    def __enter__(self) -> Gateway:
        self._server = ServerThread(loopback_guard(self.app, "127.0.0.1")).__enter__()
        self.url = self._server.url
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._server is not None:
            self._server.__exit__(None, None, None)
            self._server = None
        self.batcher.close()
        if self._record is not None:
            self._record.close()

    # -- routes

    async def _models(self, request: Request) -> Response:
        model = {"id": self.name, "object": "model", "created": 0, "owned_by": "searchgym"}
        return JSONResponse({"object": "list", "data": [model]})

    async def _chat(self, request: Request) -> Response:
        return await self._answer(request, self._chat_call)

    async def _completions(self, request: Request) -> Response:
        return await self._answer(request, self._text_call)

    async def _answer(self, request: Request, call: Any) -> Response:
        try:
            episode = self._episode(request)
        except AuthError as error:
            return _error(401, str(error), "authentication_error", code="invalid_api_key")
        try:
            body = await read_json(request)
            return await call(episode, body)
        except RequestError as error:
            episode.log.errors.append(f"{request.url.path}: {error}")
            return _error(error.status, str(error), "invalid_request_error", param=error.param)
        except GenerationError as error:
            episode.log.errors.append(f"{request.url.path}: {error}")
            return _error(500, str(error), "server_error")

    async def _chat_call(self, episode: _Episode, body: dict[str, Any]) -> Response:
        messages = check_messages(body.get("messages"))
        tools = None if body.get("tool_choice") == "none" else check_tools(body.get("tools"))
        check_unsupported(body)
        params = self._params(episode, body)
        prompt_ids = await run_in_threadpool(self.prompter.prompt, messages, tools, list(episode.chats))
        completion = await self._sample(episode, prompt_ids, params, "messages")
        reply = reply_message(_before_stop(self._written(completion), params.stop), tools)
        episode.chats.append(
            ChatTurn(normalize(messages), tools_key(tools), normalize([reply])[0], prompt_ids, completion)
        )
        finish = "tool_calls" if reply.get("tool_calls") else completion.finish_reason
        choice: dict[str, Any] = {"index": 0, "message": reply, "finish_reason": finish, "logprobs": None}
        if body.get("logprobs"):
            choice["logprobs"] = {"content": self._token_logprobs(completion)}
        out = self._envelope("chat.completion", body, prompt_ids, completion, choice)
        if not body.get("stream"):
            return JSONResponse(out)
        return _stream(self._chat_chunks(out, body))

    async def _text_call(self, episode: _Episode, body: dict[str, Any]) -> Response:
        prompt = single_prompt(body.get("prompt"), self.vocab_size)
        check_unsupported(body)
        if body.get("echo") or body.get("suffix"):
            raise RequestError("echo and suffix are not supported", "echo" if body.get("echo") else "suffix")
        params = self._params(episode, body)
        prompt_ids = await run_in_threadpool(self._text_prompt, episode, prompt)
        completion = await self._sample(episode, prompt_ids, params, "prompt")
        written = self._written(completion)
        text = _before_stop(written, params.stop)
        if isinstance(prompt, str):
            episode.texts.append((prompt + written, prompt_ids, completion))
        choice: dict[str, Any] = {
            "index": 0,
            "text": text,
            "finish_reason": completion.finish_reason,
            "logprobs": None,
        }
        if body.get("logprobs") is not None and body.get("logprobs") is not False:
            tokens = [self.prompter.tokenizer.decode([i]) for i in completion.token_ids]
            choice["logprobs"] = {
                "tokens": tokens,
                "token_logprobs": list(completion.logprobs),
                "top_logprobs": None,
            }
        out = self._envelope("text_completion", body, prompt_ids, completion, choice)
        if not body.get("stream"):
            return JSONResponse(out)
        final = {**out, "choices": [{**choice, "text": ""}]}
        first = {**out, "choices": [{**choice, "finish_reason": None}]}
        return _stream(_sse([first, final, *([_usage_chunk(out)] if _wants_usage(body) else [])]))

    def _text_prompt(self, episode: _Episode, prompt: str | list[int]) -> list[int]:
        """Token ids as given, or a text continued from an earlier call's tokens where it starts
        with that call's prompt and everything the model wrote, else tokenized."""
        if not isinstance(prompt, str):
            return prompt
        for seen, prompt_ids, completion in reversed(episode.texts):
            if prompt.startswith(seen):
                return prompt_ids + completion.token_ids + self.prompter.format.encode(prompt[len(seen) :])
        return list(self.prompter.tokenizer(prompt)["input_ids"])

    async def _sample(
        self, episode: _Episode, prompt_ids: list[int], params: SamplingParams, param: str
    ) -> Completion:
        if not prompt_ids:
            raise RequestError("the prompt is empty", param)
        if self.context is not None:
            room = self.context - len(prompt_ids)
            if room < 1:
                raise RequestError(
                    f"the prompt has {len(prompt_ids)} tokens; the model reads at most {self.context}", param
                )
            params = replace(params, max_new_tokens=min(params.max_new_tokens, room))
        try:
            with episode.log.waits.waiting():
                completion = await asyncio.wrap_future(self.batcher.submit(prompt_ids, params))
        except Exception as error:
            log.warning("generation failed for a request of episode %s", episode.log.name, exc_info=error)
            raise GenerationError(
                f"the model failed on this request: {type(error).__name__}: {error}"
            ) from None
        call = Call(
            prompt_ids,
            list(completion.token_ids),
            list(completion.logprobs),
            completion.finish_reason,
            params.temperature,
        )
        episode.log.calls.append(call)
        if self._record is not None:
            with self._lock:
                self._record.write(json.dumps({"episode": episode.log.name, **asdict(call)}) + "\n")
                self._record.flush()
        return completion

    def _params(self, episode: _Episode, body: dict[str, Any]) -> SamplingParams:
        """The call's sampling: the episode's, with the request's ``max_tokens`` (capped) and
        ``stop`` (and temperature and top-p, where requests set them)."""
        base = episode.params
        limit = body.get("max_completion_tokens", body.get("max_tokens"))
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
            raise RequestError(f"max_tokens must be a positive integer, got {limit!r}", "max_tokens")
        stop = body.get("stop") or ()
        if isinstance(stop, str):
            stop = (stop,)
        if not isinstance(stop, (list, tuple)) or not all(isinstance(s, str) and s for s in stop):
            raise RequestError("stop must be a non-empty string or a list of them", "stop")
        values: dict[str, Any] = {
            "max_new_tokens": min(limit or base.max_new_tokens, base.max_new_tokens),
            "stop": tuple(stop),
        }
        check_sampling(body, used=self.sampling_from_requests)
        if self.sampling_from_requests:
            values |= {k: body[k] for k in ("temperature", "top_p") if body.get(k) is not None}
        try:
            return replace(base, **values)
        except (ConfigError, TypeError) as error:
            raise RequestError(str(error), "temperature") from None

    def _written(self, completion: Completion) -> str:
        """Everything the model wrote: the text of the sampled ids, special tokens left out."""
        return self.prompter.tokenizer.decode(completion.token_ids, skip_special_tokens=True)

    def _token_logprobs(self, completion: Completion) -> list[dict[str, Any]]:
        out = []
        for token_id, logprob in zip(completion.token_ids, completion.logprobs):
            token = self.prompter.tokenizer.decode([token_id])
            out.append(
                {"token": token, "logprob": logprob, "bytes": list(token.encode()), "top_logprobs": []}
            )
        return out

    def _envelope(
        self,
        kind: str,
        body: dict[str, Any],
        prompt_ids: list[int],
        completion: Completion,
        choice: dict[str, Any],
    ) -> dict[str, Any]:
        if body.get("return_token_ids"):
            choice["token_ids"] = list(completion.token_ids)
        out = {
            "id": f"{'chatcmpl' if kind == 'chat.completion' else 'cmpl'}-{uuid.uuid4().hex}",
            "object": kind,
            "created": int(time.time()),
            "model": body.get("model") or self.name,
            "choices": [choice],
            "usage": {
                "prompt_tokens": len(prompt_ids),
                "completion_tokens": len(completion.token_ids),
                "total_tokens": len(prompt_ids) + len(completion.token_ids),
            },
        }
        if body.get("return_token_ids"):
            out["prompt_token_ids"] = list(prompt_ids)
        return out

    def _chat_chunks(self, out: dict[str, Any], body: dict[str, Any]) -> AsyncIterator[bytes]:
        choice = out["choices"][0]
        message = choice["message"]
        head = {k: out[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
        deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
        if message.get("content"):
            deltas.append({"content": message["content"]})
        for i, call in enumerate(message.get("tool_calls") or []):
            deltas.append({"tool_calls": [{"index": i, **call}]})
        chunks = [head | {"choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas]
        chunks.append(
            head
            | {
                "choices": [
                    {
                        "index": 0,
                        "delta": {},
                        "finish_reason": choice["finish_reason"],
                        "logprobs": choice["logprobs"],
                    }
                ]
            }
        )
        if _wants_usage(body):
            chunks.append(head | _usage_chunk(out))
        return _sse(chunks)


def _before_stop(text: str, stop: tuple[str, ...]) -> str:
    """``text`` cut before its first stop string, as OpenAI's API answers.

    >>> _before_stop("Paris</answer> more", ("</answer>",))
    'Paris'
    """
    cuts = [text.find(s) for s in stop if s in text]
    return text[: min(cuts)] if cuts else text


def _wants_usage(body: dict[str, Any]) -> bool:
    options = body.get("stream_options")
    return isinstance(options, dict) and bool(options.get("include_usage"))


def _usage_chunk(out: dict[str, Any]) -> dict[str, Any]:
    return {**out, "choices": [], "usage": out["usage"]}


async def _sse(chunks: list[dict[str, Any]]) -> AsyncIterator[bytes]:
    for chunk in chunks:
        yield f"data: {json.dumps(chunk)}\n\n".encode()
    yield b"data: [DONE]\n\n"


def _stream(chunks: AsyncIterator[bytes]) -> StreamingResponse:
    return StreamingResponse(chunks, media_type="text/event-stream")


def _error(
    status: int, message: str, kind: str, *, param: str | None = None, code: str | None = None
) -> JSONResponse:
    return JSONResponse(
        {"error": {"message": message, "type": kind, "param": param, "code": code}}, status_code=status
    )
