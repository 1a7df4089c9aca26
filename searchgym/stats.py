"""Confidence intervals for evaluation: a percentile bootstrap over tasks, and its paired form for
before/after comparisons on the same tasks.

>>> bootstrap_ci([1.0, 1.0, 1.0, 1.0])
(1.0, 1.0)
>>> low, high = paired_bootstrap_ci([0, 0, 1, 0, 1, 0, 0, 1], [1, 1, 1, 0, 1, 1, 0, 1])
>>> low > 0 and high <= 0.75
True
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from searchgym.errors import ConfigError

RESAMPLES = 10_000
CONFIDENCE = 0.95


def bootstrap_ci(
    values: Sequence[float], *, confidence: float = CONFIDENCE, resamples: int = RESAMPLES, seed: int = 0
) -> tuple[float, float]:
    """The percentile-bootstrap interval of the mean of ``values`` (one value per task): resample
    the tasks with replacement ``resamples`` times and take the central ``confidence`` share of the
    resampled means. Seeded, so a report is reproducible.

    A resample is drawn as multinomial counts of the distinct values, which has the distribution
    of drawing ``len(values)`` indices but costs one column per distinct value: 100,000 episodes
    of 0/1 EM take milliseconds."""
    if not 0 < confidence < 1:
        raise ConfigError(f"confidence must be between 0 and 1 (e.g. 0.95), got {confidence}")
    data = _as_array(values, "values")
    distinct, counts = np.unique(data, return_counts=True)
    rng = np.random.default_rng(seed)
    means = rng.multinomial(len(data), counts / len(data), size=resamples) @ distinct / len(data)
    tail = (1 - confidence) / 2
    low, high = np.quantile(means, [tail, 1 - tail])
    return float(low), float(high)


def paired_bootstrap_ci(
    before: Sequence[float],
    after: Sequence[float],
    *,
    confidence: float = CONFIDENCE,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> tuple[float, float]:
    """The interval of ``mean(after) - mean(before)`` where ``before[i]`` and ``after[i]`` score
    the same task: the tasks are resampled together, so the variation between tasks, which both
    runs share, cancels out."""
    a, b = _as_array(before, "before"), _as_array(after, "after")
    if len(a) != len(b):
        raise ConfigError(f"a paired comparison needs the same tasks: {len(a)} scores before, {len(b)} after")
    return bootstrap_ci(b - a, confidence=confidence, resamples=resamples, seed=seed)


def _as_array(values: Sequence[float], name: str) -> np.ndarray:
    data = np.asarray(values, dtype=np.float64)
    if data.ndim != 1 or len(data) == 0:
        raise ConfigError(f"{name} must be a non-empty list of per-task scores, got shape {data.shape}")
    if not np.isfinite(data).all():
        raise ConfigError(f"{name} holds a value that is not finite (NaN or infinity): score every task")
    return data
