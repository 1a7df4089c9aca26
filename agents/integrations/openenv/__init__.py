"""searchgym's envs for OpenEnv: the messages (`messages`), the `Environment` one session plays
(`environment`), the server that serves them over HTTP and WebSocket with guards and limits
(`server`, `guards`, `limits`), the env's tools as an MCP endpoint (`mcp_endpoint`), and a client
(`client`)."""
