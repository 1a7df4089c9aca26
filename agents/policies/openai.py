"""`OpenAIPolicy`: any OpenAI-compatible server (``vllm serve``, llama.cpp, hosted APIs) as a policy.

`chat` posts ``/chat/completions`` and `generate` posts ``/completions`` with the prompt as token
ids; one request per prompt, at most ``concurrency`` in flight over one reused connection pool,
answers in input order. Connection errors, timeouts, 408, 429 and 5xx are retried with
exponential backoff (at least as long as the server's ``Retry-After``); any other 4xx fails at
once with the server's message. What still fails raises `PolicyError` naming the endpoint.

Stop strings: the OpenAI API takes at most four, so the first four go to the server and the text
is cut locally after the earliest of all of them. Servers drop the stop string that ended a
completion; it is put back, as `HFPolicy` keeps it, from the server's ``stop_reason`` (vLLM) or
else from the tokens in the returned log-probs. Where the text is cut at a stop string the server
was not told about and the returned tokens do not spell the text, the token ids and log-probs
are left empty rather than misaligned.

Log-probs are the sampled tokens' as the server reports them; vLLM reports raw ones (before
temperature) unless started with ``--logprobs-mode processed_logprobs``. Token ids come back only
where the server sends them: vLLM does with ``extra_body={"return_token_ids": True}`` (newer) or
``{"return_tokens_as_token_ids": True}``. The policy has no ``tokenizer``, so `PolicyAgent` drives
it with messages through `chat`.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

from searchgym.agents.policies.base import Completion, Message, SamplingParams, check_conversations
from searchgym.errors import ConfigError, PolicyError
from searchgym.generation import request_seed

logger = logging.getLogger(__name__)

MAX_STOP = 4  # the OpenAI API rejects more stop strings
_TOKEN_ID = re.compile(r"token_id:(\d+)")


class OpenAIPolicy:
    """Generate through an OpenAI-compatible server at ``base_url`` serving ``model``.

    ``api_key`` defaults to ``$OPENAI_API_KEY`` and is sent as a Bearer token (none is sent when
    neither is set, as local servers expect). ``timeout`` bounds each attempt in seconds;
    ``max_retries`` further attempts follow a failed one after ``backoff * 2**i`` seconds.
    ``extra_body`` is merged into every request (server-specific options such as vLLM's
    ``top_k`` or ``return_token_ids``). With a ``seed``, request i of a call gets its own seed
    derived from it, so identical prompts in one call still differ while the call repeats.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str = "http://127.0.0.1:8000/v1",
        api_key: str | None = None,
        concurrency: int = 8,
        timeout: float = 60.0,
        max_retries: int = 3,
        backoff: float = 0.5,
        extra_body: dict[str, Any] | None = None,
    ) -> None:
        if not model:
            raise ConfigError(
                "name the model the server serves, e.g. OpenAIPolicy('Qwen/Qwen2.5-7B-Instruct')"
            )
        if concurrency < 1 or timeout <= 0 or max_retries < 0 or backoff < 0:
            raise ConfigError(
                "need concurrency >= 1, timeout > 0, max_retries >= 0, backoff >= 0; "
                f"got {concurrency}, {timeout}, {max_retries}, {backoff}"
            )
        self.name = model
        self.base_url = base_url.rstrip("/")
        self.concurrency, self.max_retries, self.backoff = concurrency, max_retries, backoff
        self.extra_body = dict(extra_body or {})
        key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self._client = httpx.Client(
            base_url=self.base_url,
            timeout=timeout,
            headers={"Authorization": f"Bearer {key}"} if key else {},
            limits=httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency),
        )

    def chat(self, conversations: Sequence[Sequence[Message]], params: SamplingParams) -> list[Completion]:
        check_conversations(conversations)
        bodies = [
            {"messages": [dict(m) for m in conv], **self._sampling(params, i, logprobs=True)}
            for i, conv in enumerate(conversations)
        ]
        return self._run("/chat/completions", bodies, params)

    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[Completion]:
        if isinstance(prompts, (str, bytes)) or any(isinstance(p, str) for p in prompts):
            raise TypeError("generate takes token ids; use chat() for messages")
        if any(len(p) == 0 for p in prompts):
            raise ValueError("every prompt needs at least one token")
        bodies = [
            {"prompt": [int(t) for t in p], **self._sampling(params, i, logprobs=1)}
            for i, p in enumerate(prompts)
        ]
        try:
            return self._run("/completions", bodies, params)
        except _Refused as e:
            if e.status not in (400, 404, 422):
                raise
            raise PolicyError(
                f"{e} — the server may not accept prompts as token ids (the OpenAI and vLLM completions "
                "APIs do); use chat() with messages for this server"
            ) from e

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> OpenAIPolicy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _sampling(self, params: SamplingParams, index: int, logprobs: bool | int) -> dict[str, Any]:
        """The request fields every endpoint shares (``logprobs`` is a flag for chat, a count for
        completions); ``extra_body`` comes last, so it can override any of them."""
        body: dict[str, Any] = {
            "model": self.name,
            "max_tokens": params.max_new_tokens,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "logprobs": logprobs,
        }
        if params.stop:
            body["stop"] = list(params.stop[:MAX_STOP])
        if params.seed is not None:
            body["seed"] = request_seed(params.seed, index)
        return {**body, **self.extra_body}

    def _run(self, path: str, bodies: list[dict[str, Any]], params: SamplingParams) -> list[Completion]:
        """Post every body, at most ``concurrency`` at a time; completions in input order."""
        if len(bodies) <= 1:
            return [self._complete(path, body, params) for body in bodies]
        workers = min(self.concurrency, len(bodies))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="openai-policy") as pool:
            futures = [pool.submit(self._complete, path, body, params) for body in bodies]
            try:
                return [f.result() for f in futures]
            except BaseException:
                for f in futures:  # the call has failed: do not start the requests still queued
                    f.cancel()
                raise

    def _complete(self, path: str, body: dict[str, Any], params: SamplingParams) -> Completion:
        response = self._post(path, body)
        try:
            choice = response.json()["choices"][0]
            return _completion(choice, params, chat=path == "/chat/completions")
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as e:
            raise PolicyError(
                f"{self.base_url}{path} answered in an unexpected shape ({e!r}): {response.text[:300]}"
            ) from e

    def _post(self, path: str, body: dict[str, Any]) -> httpx.Response:
        url, reason, delay = f"{self.base_url}{path}", "", 0.0
        for attempt in range(self.max_retries + 1):
            if attempt:
                logger.info("retrying %s in %.2fs (%s)", url, delay, reason)
                time.sleep(delay)
            delay = self.backoff * 2**attempt
            try:
                response = self._client.post(path, json=body)
            except httpx.TimeoutException:
                reason = f"timed out after {self._client.timeout.read}s"
                continue
            except httpx.TransportError as e:
                what = "could not connect" if isinstance(e, httpx.ConnectError) else "lost the connection"
                reason = f"{what} ({type(e).__name__}: {e})"
                continue
            status = response.status_code
            if status in (408, 429) or status >= 500:
                kind = {408: "request timeout", 429: "rate limited"}.get(status, "server error")
                reason = f"{kind} {status}: {_message(response)}"
                delay = max(delay, retry_after(response.headers) or 0.0)
                continue
            if status >= 400:  # the request itself is wrong: retrying will not help
                raise _Refused(f"{url} refused the request ({status}): {_message(response)}", status)
            return response
        raise PolicyError(f"{url} failed after {self.max_retries + 1} attempt(s): {reason}")


class _Refused(PolicyError):
    """The server answered 4xx: the request itself is wrong."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def retry_after(headers: httpx.Headers) -> float | None:
    """Seconds the server asks to wait (``retry-after-ms``, or ``Retry-After`` as seconds or an
    HTTP date), or None.

    >>> retry_after(httpx.Headers({"Retry-After": "2"}))
    2.0
    """
    if "retry-after-ms" in headers:
        try:
            return max(float(headers["retry-after-ms"]) / 1000, 0.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max((when - datetime.now(timezone.utc)).total_seconds(), 0.0)


def _message(response: httpx.Response) -> str:
    """The error message in an OpenAI-style (``{"error": {"message"}}``) or FastAPI-style body."""
    try:
        body = response.json()
    except ValueError:
        return response.text[:300]
    if isinstance(body, dict):
        error = body.get("error", body.get("detail", body.get("message")))
        if isinstance(error, dict) and "message" in error:
            return str(error["message"])[:300]
        if error is not None:
            return str(error)[:300]
    return response.text[:300]


def _completion(choice: dict[str, Any], params: SamplingParams, *, chat: bool) -> Completion:
    """One choice as a `Completion`: the stop string put back and the text cut at the earliest
    stop string, with token ids and log-probs cut to match."""
    if chat:
        text = (choice.get("message") or {}).get("content") or ""
        entries = (choice.get("logprobs") or {}).get("content") or []
        tokens = [str(e.get("token", "")) for e in entries]
        logprobs = [float(e["logprob"]) for e in entries]
    else:
        text = choice.get("text") or ""
        lp = choice.get("logprobs") or {}
        tokens = [str(t) for t in lp.get("tokens") or []]
        logprobs = [float(x) for x in lp.get("token_logprobs") or []]
    parsed = [_TOKEN_ID.fullmatch(t) for t in tokens]
    tokens_are_ids = bool(tokens) and all(parsed)
    token_ids = [int(t) for t in choice.get("token_ids") or []]
    if not token_ids and tokens_are_ids:
        token_ids = [int(m.group(1)) for m in parsed]  # type: ignore[union-attr]
    token_texts = None if tokens_are_ids or not tokens else tokens

    reason = choice.get("finish_reason")
    if reason == "stop" and not any(s in text for s in params.stop):
        matched = choice.get("stop_reason")
        sent = params.stop[:MAX_STOP]
        if not (isinstance(matched, str) and matched in sent):
            matched = _stop_after(text, token_texts, sent)
        if matched:
            text += matched
    finish = "length" if reason == "length" else "stop"
    ends = [text.find(s) + len(s) for s in params.stop if s in text]
    if ends:
        finish, end = "stop", min(ends)
        if end < len(text):  # a stop string the server was not told about
            n = _tokens_covering(token_texts, text, end)
            text = text[:end]
            token_ids, logprobs = ([], []) if n is None else (token_ids[:n], logprobs[:n])
    return Completion(text=text, token_ids=token_ids, logprobs=logprobs, finish_reason=finish)


def _stop_after(text: str, token_texts: list[str] | None, stop: Sequence[str]) -> str | None:
    """The stop string the generated tokens show right after ``text`` (which the server cut)."""
    if not token_texts:
        return None
    full = "".join(token_texts)
    if not full.startswith(text):
        return None
    rest = full[len(text) :]
    found = [s for s in stop if rest.startswith(s)]
    return min(found, key=len) if found else None


def _tokens_covering(token_texts: list[str] | None, text: str, end: int) -> int | None:
    """How many tokens spell ``text[:end]``, or None when the token texts do not spell the text."""
    if token_texts is None or not "".join(token_texts).startswith(text[:end]):
        return None
    length = 0
    for n, token in enumerate(token_texts, 1):
        length += len(token)
        if length >= end:
            return n
    return None


def from_environment(model: str, seed: int = 0) -> OpenAIPolicy:
    """``openai:MODEL``: the server at ``$SEARCHGYM_OPENAI_BASE_URL`` (default
    ``http://127.0.0.1:8000/v1``). Seeds travel per request in `SamplingParams`, so ``seed`` is unused."""
    return OpenAIPolicy(
        model, base_url=os.environ.get("SEARCHGYM_OPENAI_BASE_URL", "http://127.0.0.1:8000/v1")
    )
