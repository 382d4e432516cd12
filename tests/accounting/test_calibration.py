"""Noise calibration (accounting/calibration.py): DP-SGD's noise multiplier and PATE's vote noise
meet the target epsilon and are within one percent of the smallest that does; bad targets are
refused."""

from __future__ import annotations

import pytest

from labeldp.accounting import calibrate_noise_multiplier, dpsgd_epsilon


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
