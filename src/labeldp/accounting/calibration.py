"""Epsilon and noise calibration of the Gaussian mechanisms (DP-SGD, PATE), with dp_accounting's PLD
accountant and ``calibrate_dp_mechanism``.

DP-SGD: a step with Poisson rate q, clipping bound C and noise N(0, (sigma C)^2) on the sum of clipped
gradients is ``PoissonSampledDpEvent(q, GaussianDpEvent(sigma))``; steps compose adaptively under
add-or-remove-one-example neighbours, as dp_accounting, Opacus and the literature state it.

PATE, under replace-one-label neighbours: a replaced label changes one teacher, moving two cells of
each query's vote histogram by one (L2 sensitivity sqrt(2)) and the largest count by at most one. A GNMax
answer with vote noise N(0, sigma^2) is thus ``GaussianDpEvent(sigma / sqrt(2))``, a confident threshold
check with noise N(0, sigma_1^2) ``GaussianDpEvent(sigma_1)`` (:mod:`labeldp.mechanisms.gnmax`). The
number of queries is fixed before any vote is seen and every query is charged for its check and its
answer, passed or not, so the guarantee holds whatever the teachers' consensus. (The data-dependent
analysis of Papernot et al. 2018 charges consensual queries less, but its epsilon depends on the votes
and must itself be released privately; labeldp does not implement it.)
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import dp_accounting
from dp_accounting import dp_event
from dp_accounting.pld import accountant as pld_accountant_module
from dp_accounting.pld import common as pld_common
from dp_accounting.pld import pld_privacy_accountant

from labeldp.accounting.composition import VALUE_DISCRETIZATION, quiet_rdp
from labeldp.accounting.events import (
    DPSGD_RELATION,
    GAUSSIAN_SHIFT_RELATION,
    check_queries,
    dpsgd_event,
    gaussian_equivalent,
    pate_event,
)
from labeldp.errors import ConfigError


def pld_accountant(
    relation: dp_accounting.NeighboringRelation, discretization: float = VALUE_DISCRETIZATION
) -> pld_privacy_accountant.PLDAccountant:
    """dp_accounting's PLD accountant, by default at the ledger's discretisation."""
    return pld_privacy_accountant.PLDAccountant(relation, value_discretization_interval=discretization)


def accountant_epsilon(
    event: dp_event.DpEvent,
    delta: float,
    relation: dp_accounting.NeighboringRelation,
    discretization: float = VALUE_DISCRETIZATION,
) -> float:
    """Epsilon of ``event`` at ``delta`` under ``relation`` from dp_accounting's PLD accountant, a composition
    of Gaussians accounted as the one Gaussian it equals.
    """
    accountant = pld_accountant(relation, discretization)
    accountant.compose(gaussian_equivalent(event) or event)
    return accountant.get_epsilon(delta)


def check_target(epsilon: float, delta: float) -> None:
    """Refuse an (``epsilon``, ``delta``) that a calibration cannot aim at."""
    if not epsilon > 0 or not math.isfinite(epsilon):
        raise ConfigError(f"epsilon must be a finite number > 0, got {epsilon}")
    if not 0.0 < delta < 1.0:
        raise ConfigError(f"delta must lie in (0, 1), got {delta}")


#: Calibration first searches with PLDs this much coarser than the ledger's (far cheaper), then
#: refines within this relative span below the coarse answer at the ledger's resolution.
COARSE_DISCRETIZATION = 1e-2
_REFINE_SPAN = 0.02


def smallest_noise(
    make_event: Callable[[float], dp_event.DpEvent],
    epsilon: float,
    delta: float,
    relation: dp_accounting.NeighboringRelation,
    *,
    minimum: float,
    maximum: float,
    start: float = 1.0,
    tolerance: float = 1e-3,
) -> float:
    """The smallest noise s, to a relative ``tolerance``, with ``make_event(s)`` (epsilon, delta)-DP at the
    ledger's discretisation; epsilon must decrease as s grows.

    The answer is bracketed by doubling or halving from ``start`` within [``minimum``, ``maximum``] (tiny
    noise makes huge, slow PLDs: start near the answer), then found by ``calibrate_dp_mechanism`` with coarse
    PLDs. A coarse PLD is pessimistic too, so that answer meets the target at the ledger's resolution and the
    smallest noise that does lies a little below: a bisection there finishes. The value returned always
    meets the target; :class:`~labeldp.errors.ConfigError` if noise below ``minimum`` already does or none up
    to ``maximum`` does.
    """
    check_target(epsilon, delta)

    def meets(noise: float, discretization: float = COARSE_DISCRETIZATION) -> bool:
        return accountant_epsilon(make_event(noise), delta, relation, discretization) <= epsilon

    low, high = start / 2, start
    if meets(high):
        while meets(low):
            if low <= minimum:
                raise ConfigError(
                    f"epsilon {epsilon} at delta {delta} allows noise below {minimum}; give the noise explicitly"
                )
            low, high = low / 2, low
    else:
        while not meets(2 * high):
            high *= 2
            if high > maximum:
                raise ConfigError(f"no noise below {maximum:g} reaches epsilon {epsilon} at delta {delta}")
        low, high = high, 2 * high

    def simplest_event(noise: float) -> dp_event.DpEvent:
        return gaussian_equivalent(make_event(noise)) or make_event(noise)

    high = float(
        dp_accounting.calibrate_dp_mechanism(
            lambda: pld_accountant(relation, COARSE_DISCRETIZATION),
            simplest_event,
            epsilon,
            delta,
            bracket_interval=dp_accounting.ExplicitBracketInterval(low, high),
            tol=tolerance * low,
        )
    )
    while not meets(high, VALUE_DISCRETIZATION):  # a coarse PLD is pessimistic: this should never loop
        high *= 1 + _REFINE_SPAN
    low = high * (1 - _REFINE_SPAN)
    while meets(low, VALUE_DISCRETIZATION):  # rare: the coarse answer was more than the span too high
        low, high = low * (1 - _REFINE_SPAN), low
    while high - low > tolerance * low:
        middle = (low + high) / 2
        low, high = (low, middle) if meets(middle, VALUE_DISCRETIZATION) else (middle, high)
    return high


MIN_NOISE_MULTIPLIER = 1 / 16


def _check(sampling_probability: float, steps: int, delta: float) -> None:
    if not 0.0 < sampling_probability <= 1.0:
        raise ConfigError(f"sampling_probability must lie in (0, 1], got {sampling_probability}")
    if int(steps) != steps or steps < 1:
        raise ConfigError(f"steps must be a positive integer, got {steps}")
    if not 0.0 < delta < 1.0:
        raise ConfigError(f"delta must lie in (0, 1), got {delta}")


@functools.lru_cache(maxsize=64)
def dpsgd_epsilon(noise_multiplier: float, sampling_probability: float, steps: int, delta: float) -> float:
    """Epsilon of DP-SGD at ``delta`` (add-or-remove relation); ``math.inf`` without noise."""
    _check(sampling_probability, steps, delta)
    if noise_multiplier == 0:
        return math.inf
    return accountant_epsilon(dpsgd_event(noise_multiplier, sampling_probability, steps), delta, DPSGD_RELATION)


@functools.lru_cache(maxsize=64)  # a run's plan and its reservation ask alike: seconds of PLD accounting, once
def calibrate_noise_multiplier(
    epsilon: float, delta: float, sampling_probability: float, steps: int, tolerance: float = 1e-3
) -> float:
    """The smallest noise multiplier, to a relative ``tolerance``, for which DP-SGD's steps are (``epsilon``,
    ``delta``)-DP under add-or-remove-one-example neighbours; it always meets the target.

    Raises :class:`~labeldp.errors.ConfigError` if the target allows a multiplier below
    :data:`MIN_NOISE_MULTIPLIER` or needs one above 1e4.
    """
    _check(sampling_probability, steps, delta)
    return smallest_noise(
        lambda sigma: dpsgd_event(sigma, sampling_probability, steps),
        epsilon,
        delta,
        DPSGD_RELATION,
        minimum=MIN_NOISE_MULTIPLIER,
        maximum=1e4,
        tolerance=tolerance,
    )


#: Noise standard deviations are in votes; calibration looks for them in this range.
NOISE_RANGE = (1e-2, 1e7)


@functools.lru_cache(maxsize=64)
def pate_epsilon(queries: int, noise_std: float, delta: float, threshold_noise_std: float | None = None) -> float:
    """Epsilon at ``delta`` of :func:`~labeldp.accounting.events.pate_event` (replace-one label)."""
    if not 0.0 < delta < 1.0:
        raise ConfigError(f"delta must lie in (0, 1), got {delta}")
    return accountant_epsilon(pate_event(queries, noise_std, threshold_noise_std), delta, GAUSSIAN_SHIFT_RELATION)


@functools.lru_cache(maxsize=64)
def calibrate_vote_noise(
    epsilon: float, delta: float, queries: int, threshold_noise_ratio: float | None = None, tolerance: float = 1e-3
) -> float:
    """The smallest GNMax vote noise sigma, to a relative ``tolerance``, for which ``queries`` answers are
    (``epsilon``, ``delta``)-label-DP; it always meets the target.

    ``threshold_noise_ratio``: the threshold checks' noise over sigma (None: plain GNMax). Raises
    :class:`~labeldp.errors.ConfigError` if no noise in :data:`NOISE_RANGE` meets the target.
    """
    check_queries(queries)
    check_target(epsilon, delta)
    if threshold_noise_ratio is not None and not threshold_noise_ratio > 0:
        raise ConfigError(f"threshold_noise_ratio must be > 0, got {threshold_noise_ratio}")

    def event(sigma: float) -> dp_event.DpEvent:
        return pate_event(queries, sigma, None if threshold_noise_ratio is None else threshold_noise_ratio * sigma)

    # The queries compose into one Gaussian with noise multiplier sigma / sqrt(queries * per_query).
    # dp_accounting's analytic calibration of that Gaussian is a lower bound (the PLD accountant is
    # pessimistic): when the PLD accepts it, or it raised by the tolerance, no bisection is needed.
    per_query = 2.0 + (0.0 if threshold_noise_ratio is None else threshold_noise_ratio**-2)
    scale = math.sqrt(queries * per_query)
    exact = pld_accountant_module.get_smallest_gaussian_noise(pld_common.DifferentialPrivacyParameters(epsilon, delta))
    for candidate in (scale * exact, scale * exact * (1 + tolerance)):
        if accountant_epsilon(event(candidate), delta, GAUSSIAN_SHIFT_RELATION) <= epsilon:
            return float(candidate)
    return smallest_noise(
        event,
        epsilon,
        delta,
        GAUSSIAN_SHIFT_RELATION,
        minimum=NOISE_RANGE[0],
        maximum=NOISE_RANGE[1],
        start=scale * exact,
        tolerance=tolerance,
    )


def max_queries(epsilon: float, delta: float, noise_std: float, threshold_noise_ratio: float | None = None) -> int:
    """The most queries GNMax can answer within (``epsilon``, ``delta``) under replace-one-label neighbours.

    Q queries compose into one Gaussian whose multiplier shrinks as 1 / sqrt(Q), so the answer is
    (noise_std / sigma_1)^2 rounded down, sigma_1 the noise one query needs, then lowered while
    dp_accounting's PLD exceeds the target. ``threshold_noise_ratio`` as for :func:`calibrate_vote_noise`.
    """
    check_target(epsilon, delta)
    single = calibrate_vote_noise(epsilon, delta, 1, threshold_noise_ratio)
    queries = int((noise_std / single) ** 2)
    threshold = None if threshold_noise_ratio is None else threshold_noise_ratio * noise_std
    while queries > 0 and pate_epsilon(queries, noise_std, delta, threshold) > epsilon:
        queries -= 1
    return queries


def selection_trial_event(
    noise_multiplier: float, sampling_probability: float, steps: int, score_noise: float
) -> dp_event.DpEvent:
    """One trial of a DP-SGD private selection: the steps, then a held-out count of correct predictions
    (sensitivity 1) with N(0, ``score_noise``^2) noise.
    """
    return dp_event.ComposedDpEvent(
        [dpsgd_event(noise_multiplier, sampling_probability, steps), dp_event.GaussianDpEvent(score_noise)]
    )


@functools.lru_cache(maxsize=64)
def calibrate_selection_noise(
    epsilon: float,
    delta: float,
    sampling_probability: float,
    steps: int,
    score_noise: float,
    mean: float,
    shape: float,
    tolerance: float = 1e-3,
) -> float:
    """The smallest DP-SGD noise multiplier, to a relative ``tolerance``, for which a private selection
    (:func:`~labeldp.accounting.events.selection_event` over :func:`selection_trial_event`) is
    (``epsilon``, ``delta``)-DP by dp_accounting's RDP accountant, add-or-remove; it always meets the target.

    ``mean`` and ``shape`` describe the number of trials (shape inf: Poisson, 1: geometric). Raises
    :class:`~labeldp.errors.ConfigError` if even a multiplier of 1000 cannot pay for the selection (the
    score's noise and the trials alone spend more).
    """
    from dp_accounting.rdp import rdp_privacy_accountant

    from labeldp.accounting.events import selection_event

    check_target(epsilon, delta)
    _check(sampling_probability, steps, delta)
    if not score_noise > 0:
        raise ConfigError(f"the score's noise must be > 0, got {score_noise}")

    def make_event(sigma: float) -> dp_event.DpEvent:
        return selection_event(selection_trial_event(sigma, sampling_probability, steps, score_noise), mean, shape)

    def accountant():
        return rdp_privacy_accountant.RdpAccountant(neighboring_relation=DPSGD_RELATION)

    def spent(sigma: float) -> float:
        with quiet_rdp():
            return accountant().compose(make_event(sigma)).get_epsilon(delta)

    largest = 1e3
    if spent(largest) > epsilon:
        raise ConfigError(
            f"epsilon {epsilon:g} at delta {delta:g} cannot pay for this selection: with the score's "
            f"noise {score_noise:g} and {mean:g} trials on average it spends more even without "
            "DP-SGD; raise the score's noise or epsilon, or lower the mean number of trials"
        )
    low, high = 0.5, 1.0
    while spent(high) > epsilon:
        low, high = high, 2 * high
    while spent(low) <= epsilon:
        if low <= MIN_NOISE_MULTIPLIER:
            return MIN_NOISE_MULTIPLIER
        low, high = low / 2, low
    with quiet_rdp():
        sigma = dp_accounting.calibrate_dp_mechanism(
            accountant,
            make_event,
            epsilon,
            delta,
            bracket_interval=dp_accounting.ExplicitBracketInterval(low, high),
            tol=tolerance * low,
        )
    return float(sigma)
