"""Playing episodes, beneath the trainer, the gateway and the adapters: the rollout loop for
agents (`rollout`), `EnvSession` for other trainers' clients (`session`) and the player of agent
programs (`programs`). All three record `Episode`s (`episode`) the same way."""
