"""Accounting for DP-SGD: its dp_accounting event, its epsilon, and noise calibration.

One DP-SGD step with Poisson sampling rate q, clipping bound C and Gaussian noise N(0, (sigma C)^2)
on the sum of clipped per-example gradients is ``PoissonSampledDpEvent(q, GaussianDpEvent(sigma))``
(sensitivity C, so the noise multiplier sigma is the ratio); ``steps`` steps compose adaptively into
``SelfComposedDpEvent(step, steps)``. The neighbouring relation is add-or-remove one example (inputs
and label), as dp_accounting, Opacus and the DP-SGD literature state it. Everything is computed with
dp_accounting's PLD accountant; calibration uses its ``calibrate_dp_mechanism``.
"""

from __future__ import annotations

import math

import dp_accounting
from dp_accounting import dp_event

from labeldp.accounting.calibration import accountant_epsilon, smallest_noise

DPSGD_RELATION = dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE
MIN_NOISE_MULTIPLIER = 1 / 16


def _check(sampling_probability: float, steps: int, delta: float) -> None:
    if not 0.0 < sampling_probability <= 1.0:
        raise ValueError(f"sampling_probability must lie in (0, 1], got {sampling_probability}")
    if int(steps) != steps or steps < 1:
        raise ValueError(f"steps must be a positive integer, got {steps}")
    if not 0.0 < delta < 1.0:
        raise ValueError(f"delta must lie in (0, 1), got {delta}")


def dpsgd_event(noise_multiplier: float, sampling_probability: float, steps: int) -> dp_event.DpEvent:
    """The dp_accounting event of ``steps`` Poisson-sampled Gaussian steps."""
    if not noise_multiplier >= 0:
        raise ValueError(f"noise_multiplier must be >= 0, got {noise_multiplier}")
    step = dp_event.PoissonSampledDpEvent(sampling_probability, dp_event.GaussianDpEvent(noise_multiplier))
    return dp_event.SelfComposedDpEvent(step, int(steps))


def dpsgd_epsilon(noise_multiplier: float, sampling_probability: float, steps: int, delta: float) -> float:
    """Epsilon of DP-SGD at ``delta`` (add-or-remove relation), from dp_accounting's PLD accountant."""
    _check(sampling_probability, steps, delta)
    if noise_multiplier == 0:
        return math.inf
    return accountant_epsilon(dpsgd_event(noise_multiplier, sampling_probability, steps), delta, DPSGD_RELATION)


def calibrate_noise_multiplier(epsilon: float, delta: float, sampling_probability: float, steps: int,
                               tolerance: float = 1e-3) -> float:
    """The smallest noise multiplier (to a relative ``tolerance``) for which ``steps`` Poisson-sampled
    Gaussian steps at rate ``sampling_probability`` are (``epsilon``, ``delta``)-DP.

    Uses dp_accounting's ``calibrate_dp_mechanism`` (bisection on the PLD accountant's epsilon); the
    returned value always meets the target.
    """
    _check(sampling_probability, steps, delta)
    return smallest_noise(lambda sigma: dpsgd_event(sigma, sampling_probability, steps), epsilon, delta,
                          DPSGD_RELATION, minimum=MIN_NOISE_MULTIPLIER, maximum=1e4, tolerance=tolerance)
