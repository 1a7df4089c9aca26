"""The env's tools as a Model Context Protocol endpoint (streamable HTTP), beside OpenEnv's routes.

Any MCP client (the ``mcp`` SDK's, an agent framework's) lists the env's tools, with the schemas
generated from the same `Tool` definitions the env's parser uses, and calls them. Each MCP session
plays one OpenEnv session of the server:

- ``/mcp?session_id=ID`` attaches to the OpenEnv session ``ID`` (a WebSocket client's, which the
  trainer resets and reads rewards from): a tool call steps that same episode;
- plain ``/mcp`` (optionally ``?task_index=I&seed=S`` or ``?task_id=T``) opens a session of its
  own, reset on the MCP session's first request and closed when the client ends it (or when it
  has been idle for the server's timeout). Its first observation (instructions and question) is
  the prompt ``task``.

A tool call's text is what the tool returned (the observation without the protocol's result
tags); its structured content holds the whole ``observation``, the step's ``reward``, ``done``,
``reward_components`` and the env's ``info``. A call the env cannot play (the episode is over, an
unknown session) is an MCP tool error the agent reads, not a protocol error. A tool call or prompt
counts as the session's activity, so a WebSocket session an MCP client plays is not closed as idle.

Whoever holds an MCP session's id (or an OpenEnv session's) plays its episode: two clients sharing
one play the same episode, their tool calls taking turns, each one step, in the order they arrive.
A request whose JSON-RPC id is that of another request of the session still in flight is answered
409 (the MCP SDK would route both answers to one of them and leave the other waiting forever).
The server's guards (`searchgym.agents.integrations.openenv.guards`) check the Host and Origin of every
request, so the MCP SDK's own DNS-rebinding check is off.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from openenv.core.env_server.http_server import HTTPEnvServer
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from searchgym.agents.integrations.openenv.environment import SearchgymEnvironment
from searchgym.agents.integrations.openenv.guards import load_json, replay_body
from searchgym.agents.integrations.openenv.messages import NoEpisodeError
from searchgym.envs.tools import Tool

TASK_PROMPT = "task"
SESSION_HEADER = "mcp-session-id"


class McpEndpoint:
    """An ASGI app serving the env's ``tools`` over MCP for the sessions of ``env_server``."""

    def __init__(
        self,
        env_server: HTTPEnvServer,
        tools: Sequence[Tool],
        *,
        idle_timeout_s: float | None,
        max_body_bytes: int,
    ) -> None:
        self.env_server = env_server
        self.tools = [
            types.Tool(
                name=t.name, description=t.description, inputSchema=t.schema()["function"]["parameters"]
            )
            for t in tools
        ]
        self._own: dict[str, str] = {}  # MCP session id -> the OpenEnv session it opened
        self._opening: dict[str, asyncio.Lock] = {}  # MCP session id -> held while it opens its own
        self._in_flight: set[tuple[str, str]] = set()  # (MCP session id, JSON-RPC id) being answered
        server: Server = Server("searchgym")
        server.list_tools()(self._list_tools)
        server.call_tool(validate_input=True)(self._call_tool)
        server.list_prompts()(self._list_prompts)
        server.get_prompt()(self._get_prompt)
        self.server = server
        # the server's guards check Host and Origin (see the module docstring)
        security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
        self.manager = StreamableHTTPSessionManager(
            server,
            json_response=True,
            security_settings=security,
            session_idle_timeout=idle_timeout_s,
            max_request_body_size=max_body_bytes,
            max_sessions=env_server.max_concurrent_envs,
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        mcp_id = dict(scope["headers"]).get(SESSION_HEADER.encode(), b"").decode("latin-1")
        if scope["method"] == "POST" and mcp_id:
            return await self._post(mcp_id, scope, receive, send)
        await self.manager.handle_request(scope, receive, send)
        if scope["method"] == "DELETE":  # the client ended its MCP session: free the env it opened
            self._opening.pop(mcp_id, None)
            own = self._own.pop(mcp_id, None)
            if own is not None:
                await self.env_server._destroy_session(own)

    async def _post(self, mcp_id: str, scope: Scope, receive: Receive, send: Send) -> None:
        """A message of MCP session ``mcp_id``, refused (409) if a request of the session with its
        JSON-RPC id is in flight."""
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False) and message["type"] == "http.request"
        try:
            request = load_json(body)
        except ValueError:  # the server's `MessageCheck` answered what it cannot read; the SDK, bad JSON
            request = None
        key = None
        if isinstance(request, dict) and "method" in request and "id" in request:
            key = (mcp_id, json.dumps(request["id"]))
            if key in self._in_flight:
                detail = (
                    f"request id {request['id']!r} is already in flight in this MCP session: clients that "
                    "share a session take turns, each request with an id no other in flight has"
                )
                error = {"code": -32600, "message": detail}
                reply = {"jsonrpc": "2.0", "id": request["id"], "error": error}
                return await JSONResponse(reply, status_code=409)(scope, receive, send)
            self._in_flight.add(key)
        try:
            await self.manager.handle_request(scope, replay_body(body, receive), send)
        finally:
            if key is not None:
                self._in_flight.discard(key)

    # -- MCP handlers ------------------------------------------------------------------------
    async def _list_tools(self) -> list[types.Tool]:
        return self.tools

    async def _call_tool(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        try:
            session_id, env = await self._session()
            obs = await self.env_server._run_in_session_executor(session_id, env.call_tool, name, arguments)
            self.env_server._update_session_activity(session_id, increment_step=True)
        except (NoEpisodeError, LookupError, ValueError) as e:
            return types.CallToolResult(content=[types.TextContent(type="text", text=str(e))], isError=True)
        text = env.session.protocol.unwrap_result(obs.text)
        structured = {
            "observation": obs.text,
            "reward": obs.reward,
            "done": obs.done,
            "reward_components": obs.reward_components,
            "info": obs.metadata,
        }
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)], structuredContent=structured
        )

    async def _list_prompts(self) -> list[types.Prompt]:
        return [types.Prompt(name=TASK_PROMPT, description="the episode's instructions and question")]

    async def _get_prompt(self, name: str, arguments: dict[str, str] | None) -> types.GetPromptResult:
        if name != TASK_PROMPT:
            raise ValueError(f"unknown prompt {name!r}; the prompt is {TASK_PROMPT!r}")
        session_id, env = await self._session()
        self.env_server._update_session_activity(session_id)
        message = types.PromptMessage(
            role="user", content=types.TextContent(type="text", text=env.first_text)
        )
        return types.GetPromptResult(
            description="the episode's instructions and question", messages=[message]
        )

    # -- sessions ----------------------------------------------------------------------------
    async def _session(self) -> tuple[str, SearchgymEnvironment]:
        """The OpenEnv session this MCP request plays (see the module docstring)."""
        request: Request = self.server.request_context.request
        params = request.query_params
        if "session_id" in params:
            session_id = params["session_id"]
        else:
            mcp_id = request.headers.get(SESSION_HEADER, "")
            async with self._opening.setdefault(mcp_id, asyncio.Lock()):  # one open per MCP session
                session_id = self._own.get(mcp_id) or await self._open(mcp_id, params)
        env = self.env_server._sessions.get(session_id)
        if env is None:
            self._own.pop(request.headers.get(SESSION_HEADER, ""), None)
            raise LookupError(f"no session {session_id!r} on this server (it ended, or was idle too long)")
        return session_id, env

    async def _open(self, mcp_id: str, params: Any) -> str:
        """Open an OpenEnv session for MCP session ``mcp_id`` and reset it as ``params`` say."""
        reset = {k: params[k] for k in ("task_id",) if k in params}
        for key in ("task_index", "seed"):
            if key in params:
                try:
                    reset[key] = int(params[key])
                except ValueError:
                    raise ValueError(f"{key} must be an integer, got {params[key]!r}") from None
        session_id, env = await self.env_server._create_session()
        try:
            await self.env_server._run_in_session_executor(session_id, lambda: env.reset(**reset))
        except Exception:
            await self.env_server._destroy_session(session_id)
            raise
        if mcp_id:
            self._own[mcp_id] = session_id
        return session_id
