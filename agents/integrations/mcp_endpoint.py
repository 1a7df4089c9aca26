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
unknown session) is an MCP tool error the agent reads, not a protocol error.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from openenv.core.env_server.http_server import HTTPEnvServer
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from searchgym.agents.integrations.openenv_env import NoEpisodeError, SearchgymEnvironment
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
        allowed_hosts: Sequence[str] | None,
    ) -> None:
        self.env_server = env_server
        self.tools = [
            types.Tool(
                name=t.name, description=t.description, inputSchema=t.schema()["function"]["parameters"]
            )
            for t in tools
        ]
        self._own: dict[str, str] = {}  # MCP session id -> the OpenEnv session it opened
        server: Server = Server("searchgym")
        server.list_tools()(self._list_tools)
        server.call_tool(validate_input=True)(self._call_tool)
        server.list_prompts()(self._list_prompts)
        server.get_prompt()(self._get_prompt)
        self.server = server
        security = (
            TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=list(allowed_hosts))
            if allowed_hosts
            else TransportSecuritySettings(enable_dns_rebinding_protection=False)
        )
        self.manager = StreamableHTTPSessionManager(
            server,
            json_response=True,
            security_settings=security,
            session_idle_timeout=idle_timeout_s,
            max_request_body_size=max_body_bytes,
            max_sessions=env_server.max_concurrent_envs,
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.manager.handle_request(scope, receive, send)
        if scope["method"] == "DELETE":  # the client ended its MCP session: free the env it opened
            mcp_id = dict(scope["headers"]).get(SESSION_HEADER.encode(), b"").decode()
            own = self._own.pop(mcp_id, None)
            if own is not None:
                await self.env_server._destroy_session(own)

    # -- MCP handlers ------------------------------------------------------------------------
    async def _list_tools(self) -> list[types.Tool]:
        return self.tools

    async def _call_tool(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        try:
            session_id, env = await self._session()
            obs = await self.env_server._run_in_session_executor(session_id, env.call_tool, name, arguments)
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
        _, env = await self._session()
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
