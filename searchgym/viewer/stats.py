"""Confidence intervals the viewer shows beside a mean."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from searchgym.errors import ConfigError


def bootstrap_interval(
    values: Sequence[float] | np.ndarray, *, level: float = 0.95, resamples: int = 2000, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``values`` (e.g. per-episode EM): the central
    ``level`` of the means of ``resamples`` resamples drawn with replacement.

    A resample is drawn as multinomial counts of the distinct values, which has the same
    distribution as drawing ``len(values)`` indices but costs one row per distinct value, so a
    100,000-episode run of 0/1 EM takes milliseconds. Seeded: the same values give the same
    interval.

    >>> bootstrap_interval([1.0] * 10)
    (1.0, 1.0)
    >>> low, high = bootstrap_interval([0.0, 1.0] * 50)  # p = 0.5, n = 100: about 0.5 ± 0.098
    >>> round(low, 2), round(high, 2)
    (0.4, 0.6)
    """
    if not 0 < level < 1:
        raise ConfigError(f"level must be between 0 and 1 (e.g. 0.95), got {level}")
    if resamples < 1:
        raise ConfigError(f"resamples must be at least 1, got {resamples}")
    data = np.asarray(values, dtype=float)
    data = data[np.isfinite(data)]
    if data.size == 0:
        raise ConfigError("no finite values to bootstrap")
    distinct, counts = np.unique(data, return_counts=True)
    rng = np.random.default_rng(seed)
    draws = rng.multinomial(data.size, counts / data.size, size=resamples)
    means = draws @ distinct / data.size
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(low), float(high)
