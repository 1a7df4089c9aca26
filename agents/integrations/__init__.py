"""Adapters to other trainers, one folder or file a framework: OpenEnv (`openenv`, with its MCP
endpoint), verifiers (`verifiers`, versions 0.3 and 0.4), trl (`trl`), SkyRL (`skyrl`) and verl
(`verl`)."""
