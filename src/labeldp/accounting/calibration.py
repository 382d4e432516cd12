"""Noise calibration shared by the Gaussian mechanisms (DP-SGD, PATE): the smallest noise that meets
a target (epsilon, delta), found with dp_accounting's PLD accountant and ``calibrate_dp_mechanism``."""

from __future__ import annotations

import math
from typing import Callable

import dp_accounting
from dp_accounting import dp_event
from dp_accounting.pld import pld_privacy_accountant

from labeldp.accounting.ledger import VALUE_DISCRETIZATION


def pld_accountant(relation: dp_accounting.NeighboringRelation) -> pld_privacy_accountant.PLDAccountant:
    """dp_accounting's PLD accountant with the ledger's discretisation."""
    return pld_privacy_accountant.PLDAccountant(relation, value_discretization_interval=VALUE_DISCRETIZATION)


def accountant_epsilon(event: dp_event.DpEvent, delta: float, relation: dp_accounting.NeighboringRelation) -> float:
    """Epsilon of ``event`` at ``delta`` under ``relation``, from dp_accounting's PLD accountant."""
    accountant = pld_accountant(relation)
    accountant.compose(event)
    return accountant.get_epsilon(delta)


def check_target(epsilon: float, delta: float) -> None:
    if not epsilon > 0 or not math.isfinite(epsilon):
        raise ValueError(f"epsilon must be a finite number > 0, got {epsilon}")
    if not 0.0 < delta < 1.0:
        raise ValueError(f"delta must lie in (0, 1), got {delta}")


def smallest_noise(make_event: Callable[[float], dp_event.DpEvent], epsilon: float, delta: float,
                   relation: dp_accounting.NeighboringRelation, *, minimum: float, maximum: float,
                   start: float = 1.0, tolerance: float = 1e-3) -> float:
    """The smallest noise parameter s (to a relative ``tolerance``) with ``make_event(s)``
    (epsilon, delta)-DP; epsilon must decrease as s grows. The returned value always meets the target.

    The answer is bracketed by doubling or halving from ``start`` within [``minimum``, ``maximum``]
    (tiny noise makes huge, slow PLDs: start near the answer), then found by dp_accounting's ``calibrate_dp_mechanism`` (bisection).
    """
    check_target(epsilon, delta)

    def meets(noise: float) -> bool:
        return accountant_epsilon(make_event(noise), delta, relation) <= epsilon

    low, high = start / 2, start
    if meets(high):
        while meets(low):
            if low <= minimum:
                raise ValueError(f"epsilon {epsilon} at delta {delta} allows noise below {minimum}; "
                                 "give the noise explicitly")
            low, high = low / 2, low
    else:
        while not meets(2 * high):
            high *= 2
            if high > maximum:
                raise ValueError(f"no noise below {maximum:g} reaches epsilon {epsilon} at delta {delta}")
        low, high = high, 2 * high
    noise = dp_accounting.calibrate_dp_mechanism(
        lambda: pld_accountant(relation), make_event, epsilon, delta,
        bracket_interval=dp_accounting.ExplicitBracketInterval(low, high), tol=tolerance * low)
    return float(noise)
