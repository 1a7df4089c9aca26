"""The one config of the generated world."""

from __future__ import annotations

from dataclasses import dataclass

from searchgym.errors import ConfigError

MIN_PASSAGES, MAX_PASSAGES = 300, 500_000
MAX_HOPS = 4


@dataclass(frozen=True)
class WorldConfig:
    """What world to generate; the same config always gives the same world, byte for byte."""

    seed: int = 0
    """Seed of every random choice; different seeds give unrelated worlds."""
    n_passages: int = 2000
    """Target corpus size; the generated corpus has this many passages (within a few)."""
    train_per_hop: int = 2000
    """Train questions per hop count, fewer if the world runs out of distinct chains."""
    dev_per_hop: int = 200
    """Dev questions per hop count, fewer if the world runs out of distinct chains."""
    test_per_hop: int = 200
    """Test questions per hop count, fewer if the world runs out of distinct chains."""
    max_hops: int = 4
    """Longest question chain, from 1 to 4 hops."""

    def __post_init__(self) -> None:
        for name in ("seed", "n_passages", "train_per_hop", "dev_per_hop", "test_per_hop",
                     "max_hops"):  # fmt: skip
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError(
                    f"WorldConfig.{name} must be an int, got {value!r} "
                    f"({type(value).__name__}); pass a whole number such as {name}=0"
                )
        if self.seed < 0:
            raise ConfigError(f"WorldConfig.seed must be >= 0, got {self.seed}; use e.g. seed=0")
        if not MIN_PASSAGES <= self.n_passages <= MAX_PASSAGES:
            raise ConfigError(
                f"WorldConfig.n_passages must be between {MIN_PASSAGES:,} and {MAX_PASSAGES:,}, "
                f"got {self.n_passages:,}; smaller worlds have too few distinct facts to ask "
                f"about, so use n_passages={MIN_PASSAGES} for a tiny test world"
            )
        for name in ("train_per_hop", "dev_per_hop", "test_per_hop"):
            if getattr(self, name) < 0:
                raise ConfigError(
                    f"WorldConfig.{name} must be >= 0, got {getattr(self, name)}; "
                    f"use 0 to generate no questions for that split"
                )
        if not 1 <= self.max_hops <= MAX_HOPS:
            raise ConfigError(
                f"WorldConfig.max_hops must be between 1 and {MAX_HOPS}, got {self.max_hops}; "
                f"questions compose at most {MAX_HOPS} hops"
            )

    @property
    def per_hop(self) -> dict[str, int]:
        """Questions asked for per hop count, by split."""
        return {"train": self.train_per_hop, "dev": self.dev_per_hop, "test": self.test_per_hop}
