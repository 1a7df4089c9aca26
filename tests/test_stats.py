"""The confidence intervals that evaluations report, pinned on worked examples."""

import math

import numpy as np
import pytest

from searchgym.errors import ConfigError
from searchgym.stats import bootstrap_ci, paired_bootstrap_ci


def test_the_bootstrap_interval_of_a_mean_matches_the_normal_approximation_on_a_worked_example():
    # 200 tasks, half solved: mean 0.5, standard error sqrt(0.25 / 200) = 0.0354, so the normal
    # approximation gives 0.5 +- 1.96 x 0.0354 = [0.431, 0.569]
    low, high = bootstrap_ci([1.0, 0.0] * 100)
    assert (low, high) == (0.43, 0.57)  # seeded: the same report every time
    se = math.sqrt(0.25 / 200)
    assert low == pytest.approx(0.5 - 1.96 * se, abs=0.005) and high == pytest.approx(
        0.5 + 1.96 * se, abs=0.005
    )


def test_an_interval_narrows_with_more_tasks_and_is_a_point_without_variation():
    small, large = bootstrap_ci([1.0, 0.0] * 25), bootstrap_ci([1.0, 0.0] * 400)
    assert small[1] - small[0] > 2 * (large[1] - large[0])
    assert bootstrap_ci([1.0] * 7) == (1.0, 1.0)


def test_pairing_removes_the_variation_the_two_runs_share():
    # after solves exactly the tasks before solved plus 20 more of 200: every paired difference is
    # 0 or 1, and the interval of the difference (0.10) is much narrower than unpaired intervals
    before = [1.0] * 80 + [0.0] * 120
    after = [1.0] * 100 + [0.0] * 100
    low, high = paired_bootstrap_ci(before, after)
    assert low > 0.05 and high < 0.15 and low < 0.10 < high
    b_low, b_high = bootstrap_ci(before)
    a_low, a_high = bootstrap_ci(after)
    assert a_low < b_high  # unpaired, the two intervals overlap: no conclusion without pairing
    assert paired_bootstrap_ci(before, before) == (0.0, 0.0)


def test_resampling_counts_of_distinct_values_equals_resampling_indices():
    values = np.array([0.0, 0.5, 1.0, 1.0, 0.25])
    rng = np.random.default_rng(1)
    means = values[rng.integers(0, len(values), size=(20_000, len(values)))].mean(axis=1)
    expected = np.percentile(means, [2.5, 97.5])
    assert bootstrap_ci(values, resamples=20_000) == pytest.approx(tuple(expected), abs=0.03)


def test_bad_inputs_say_what_is_wrong():
    with pytest.raises(ConfigError, match="same tasks: 2 scores before, 3 after"):
        paired_bootstrap_ci([1, 0], [1, 0, 1])
    with pytest.raises(ConfigError, match="non-empty list of per-task scores"):
        bootstrap_ci([])
    with pytest.raises(ConfigError, match="not finite"):
        bootstrap_ci([1.0, float("nan")])
    with pytest.raises(ConfigError, match="between 0 and 1"):
        bootstrap_ci([1.0], confidence=95)
