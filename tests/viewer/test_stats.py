"""The EM interval the viewer shows when a run's metrics carry none."""

import numpy as np
import pytest

from searchgym.errors import ConfigError
from searchgym.viewer.stats import bootstrap_interval


def test_worked_example_matches_the_normal_approximation():
    # 30 of 100 episodes right: p = 0.3, standard error sqrt(0.3 * 0.7 / 100) = 0.0458,
    # so the 95 % interval is about 0.3 ± 1.96 * 0.0458 = [0.210, 0.390]
    low, high = bootstrap_interval([1.0] * 30 + [0.0] * 70, resamples=20_000)
    assert low == pytest.approx(0.21, abs=0.015) and high == pytest.approx(0.39, abs=0.015)
    assert low < 0.3 < high


def test_resampling_counts_equals_resampling_indices():
    values = np.array([0.0, 0.5, 1.0, 1.0, 0.25])
    rng = np.random.default_rng(1)
    means = values[rng.integers(0, len(values), size=(20_000, len(values)))].mean(axis=1)
    expected = np.percentile(means, [2.5, 97.5])
    assert bootstrap_interval(values, resamples=20_000) == pytest.approx(tuple(expected), abs=0.03)


def test_constant_values_give_a_point_and_the_same_seed_the_same_interval():
    assert bootstrap_interval([0.0] * 7) == (0.0, 0.0)
    values = [0, 1, 1, 0, 1]
    assert bootstrap_interval(values) == bootstrap_interval(values)


def test_nan_values_are_left_out_and_bad_arguments_say_what_to_give():
    assert bootstrap_interval([1.0, float("nan")]) == (1.0, 1.0)
    with pytest.raises(ConfigError, match="no finite values"):
        bootstrap_interval([float("nan")])
    with pytest.raises(ConfigError, match="between 0 and 1"):
        bootstrap_interval([1.0], level=95)
