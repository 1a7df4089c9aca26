"""Default limits of `searchgym serve-env` (kept apart from the server, whose imports take seconds,
so that the CLI can show them in ``--help`` at once)."""

DEFAULT_MAX_SESSIONS = 64
"""Sessions playing at once, WebSocket and MCP together."""
DEFAULT_IDLE_TIMEOUT_S = 300.0
"""Seconds before an idle session is closed and its env freed."""
DEFAULT_MAX_MESSAGE_BYTES = 1 << 20
"""The largest request body or WebSocket message."""
