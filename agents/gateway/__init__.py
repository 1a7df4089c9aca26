"""A token-recording OpenAI-compatible gateway, and agent programs played through it."""
