"""Noise calibration (accounting/calibration.py): DP-SGD's noise multiplier and PATE's vote noise
meet the target epsilon and are within one percent of the smallest that does; bad targets are
refused."""

from __future__ import annotations

import pytest

from labeldp.accounting import (
    calibrate_noise_multiplier,
    calibrate_vote_noise,
    dpsgd_epsilon,
    max_queries,
    pate_epsilon,
)


@pytest.mark.parametrize("epsilon,q,steps", [(1.0, 0.01, 1000), (2.0, 256 / 60000, 2340), (4.0, 0.1, 50)])
def test_calibration_meets_target_and_is_within_one_percent_of_smallest(epsilon, q, steps):
    sigma = calibrate_noise_multiplier(epsilon, 1e-5, q, steps)
    assert dpsgd_epsilon(sigma, q, steps, 1e-5) <= epsilon
    assert dpsgd_epsilon(0.99 * sigma, q, steps, 1e-5) > epsilon


def test_calibration_refuses_bad_input():
    with pytest.raises(ValueError, match="sampling_probability"):
        calibrate_noise_multiplier(1.0, 1e-5, 0.0, 10)
    with pytest.raises(ValueError, match="delta"):
        calibrate_noise_multiplier(1.0, 0.0, 0.1, 10)
    with pytest.raises(ValueError, match="epsilon"):
        calibrate_noise_multiplier(-1.0, 1e-5, 0.1, 10)


@pytest.mark.parametrize("ratio", [None, 2.0])
def test_calibration_meets_the_target_and_is_within_one_percent(ratio):
    epsilon, delta, queries = 1.0, 1e-5, 120
    sigma = calibrate_vote_noise(epsilon, delta, queries, ratio)
    threshold = None if ratio is None else ratio * sigma
    assert pate_epsilon(queries, sigma, delta, threshold) <= epsilon
    smaller = 0.99 * sigma
    assert pate_epsilon(queries, smaller, delta, None if ratio is None else ratio * smaller) > epsilon
    most = max_queries(epsilon, delta, sigma, ratio)
    assert most >= queries
    assert pate_epsilon(most + 1, sigma, delta, threshold) > epsilon
