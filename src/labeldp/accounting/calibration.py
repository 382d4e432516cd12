"""Epsilon and noise calibration of the Gaussian mechanisms (DP-SGD, PATE), with dp_accounting's PLD
accountant and ``calibrate_dp_mechanism``.

DP-SGD: one step with Poisson sampling rate q, clipping bound C and Gaussian noise N(0, (sigma C)^2)
on the sum of clipped per-example gradients is ``PoissonSampledDpEvent(q, GaussianDpEvent(sigma))``
(sensitivity C, so the noise multiplier sigma is the ratio); ``steps`` steps compose adaptively, under
add-or-remove-one-example neighbours, as dp_accounting, Opacus and the DP-SGD literature state it.

PATE: under replace-one-label neighbours, one replaced label changes one teacher, so on every query
two cells of the vote histogram move by one (L2 sensitivity sqrt(2)) and the largest count by at
most one. One GNMax answer with vote noise N(0, sigma^2) is therefore ``GaussianDpEvent(sigma /
sqrt(2))`` and one confident threshold check with noise N(0, sigma_1^2) is ``GaussianDpEvent(sigma_1)``
(:mod:`labeldp.mechanisms.gnmax`). The number of queries is fixed before any vote is seen, and every
query is charged for both its threshold check and its GNMax answer whether or not it passes the
check: the guarantee then holds whatever the teachers' consensus. (PATE's data-dependent analysis,
Papernot et al. 2018, charges consensual queries less, but its epsilon depends on the votes and must
itself be released privately; labeldp does not implement it.) Epsilons come from dp_accounting's
Gaussian PLD for a query that moves by its sensitivity (``GAUSSIAN_SHIFT_RELATION``), as the ledger
builds it.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import dp_accounting
from dp_accounting import dp_event
from dp_accounting.pld import accountant as pld_accountant_module
from dp_accounting.pld import common as pld_common
from dp_accounting.pld import pld_privacy_accountant

from labeldp.accounting.events import (
    DPSGD_RELATION,
    GAUSSIAN_SHIFT_RELATION,
    check_queries,
    dpsgd_event,
    gaussian_equivalent,
    pate_event,
)
from labeldp.accounting.ledger import VALUE_DISCRETIZATION, quiet_rdp
from labeldp.errors import ConfigError


def pld_accountant(
    relation: dp_accounting.NeighboringRelation, discretization: float = VALUE_DISCRETIZATION
) -> pld_privacy_accountant.PLDAccountant:
    """dp_accounting's PLD accountant, by default with the ledger's discretisation.

    Parameters
    ----------
    relation : dp_accounting.NeighboringRelation
        The neighbouring relation the accountant states its epsilons under.
    discretization : float, optional
        The value discretisation interval of the privacy loss (default the ledger's
        ``VALUE_DISCRETIZATION``).

    Returns
    -------
    dp_accounting.pld.pld_privacy_accountant.PLDAccountant
        A new accountant with nothing composed yet.
    """
    return pld_privacy_accountant.PLDAccountant(relation, value_discretization_interval=discretization)


def accountant_epsilon(
    event: dp_event.DpEvent,
    delta: float,
    relation: dp_accounting.NeighboringRelation,
    discretization: float = VALUE_DISCRETIZATION,
) -> float:
    """Epsilon of ``event`` at ``delta`` under ``relation``, from dp_accounting's PLD accountant.

    A composition of Gaussians is accounted as the one Gaussian it equals
    (:func:`~labeldp.accounting.events.gaussian_equivalent`).

    Parameters
    ----------
    event : dp_accounting.dp_event.DpEvent
        The event to account.
    delta : float
        The target delta.
    relation : dp_accounting.NeighboringRelation
        The neighbouring relation.
    discretization : float, optional
        The PLD's value discretisation interval (default the ledger's).

    Returns
    -------
    float
        The smallest epsilon such that ``event`` is (epsilon, delta)-DP by the PLD (pessimistic by at
        most about the discretisation).
    """
    accountant = pld_accountant(relation, discretization)
    accountant.compose(gaussian_equivalent(event) or event)
    return accountant.get_epsilon(delta)


def check_target(epsilon: float, delta: float) -> None:
    """Check that (``epsilon``, ``delta``) is a target a calibration can aim at.

    Parameters
    ----------
    epsilon : float
        Target epsilon, a finite number > 0.
    delta : float
        Target delta, in (0, 1).

    Returns
    -------
    None

    Raises
    ------
    labeldp.errors.ConfigError
        If ``epsilon`` is not a finite number > 0 or ``delta`` is not in (0, 1).
    """
    if not epsilon > 0 or not math.isfinite(epsilon):
        raise ConfigError(f"epsilon must be a finite number > 0, got {epsilon}")
    if not 0.0 < delta < 1.0:
        raise ConfigError(f"delta must lie in (0, 1), got {delta}")


#: Calibration first searches with PLDs this much coarser than the ledger's (about 100x cheaper), then
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
    """The smallest noise parameter s with ``make_event(s)`` (epsilon, delta)-DP.

    The noise is found to a relative ``tolerance``, at the ledger's discretisation; epsilon must
    decrease as s grows. The returned value always meets the target.

    The answer is bracketed by doubling or halving from ``start`` within [``minimum``, ``maximum``]
    (tiny noise makes huge, slow PLDs: start near the answer) and found by dp_accounting's
    ``calibrate_dp_mechanism`` with coarse PLDs. A coarse PLD's epsilon is pessimistic too, so that
    answer meets the target at the ledger's resolution as well, and the smallest noise that does lies
    at most a little below it: bisection there, every epsilon from dp_accounting, finishes the search.

    Parameters
    ----------
    make_event : callable
        Maps a noise parameter (float) to the dp_accounting.dp_event.DpEvent it makes.
    epsilon : float
        Target epsilon, a finite number > 0.
    delta : float
        Target delta, in (0, 1).
    relation : dp_accounting.NeighboringRelation
        The neighbouring relation the target is stated under.
    minimum : float
        The smallest noise considered.
    maximum : float
        The largest noise considered.
    start : float, optional
        Where the bracketing starts (default 1).
    tolerance : float, optional
        Relative precision of the answer (default 1e-3).

    Returns
    -------
    float
        The noise parameter; ``make_event`` of it meets the target.

    Raises
    ------
    labeldp.errors.ConfigError
        If the target is invalid, if noise below ``minimum`` already meets it, or if no noise up to
        ``maximum`` does.
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


def dpsgd_epsilon(noise_multiplier: float, sampling_probability: float, steps: int, delta: float) -> float:
    """Epsilon of DP-SGD at ``delta`` (add-or-remove relation), from dp_accounting's PLD accountant.

    Parameters
    ----------
    noise_multiplier : float
        Ratio of the noise's standard deviation to the clipping bound; 0 gives an infinite epsilon.
    sampling_probability : float
        Poisson sampling rate of each step, in (0, 1].
    steps : int
        Number of steps, a positive integer.
    delta : float
        Target delta, in (0, 1).

    Returns
    -------
    float
        The epsilon of :func:`~labeldp.accounting.events.dpsgd_event` at ``delta``, or ``math.inf``.

    Raises
    ------
    labeldp.errors.ConfigError
        If ``sampling_probability``, ``steps`` or ``delta`` is out of range, or ``noise_multiplier`` is
        negative.
    """
    _check(sampling_probability, steps, delta)
    if noise_multiplier == 0:
        return math.inf
    return accountant_epsilon(dpsgd_event(noise_multiplier, sampling_probability, steps), delta, DPSGD_RELATION)


def calibrate_noise_multiplier(
    epsilon: float, delta: float, sampling_probability: float, steps: int, tolerance: float = 1e-3
) -> float:
    """The smallest noise multiplier for which DP-SGD's steps are (``epsilon``, ``delta``)-DP.

    The multiplier is found to a relative ``tolerance``, for ``steps`` Poisson-sampled Gaussian steps
    at rate ``sampling_probability``, under add-or-remove-one-example neighbours.

    Uses dp_accounting's ``calibrate_dp_mechanism`` (bisection on the PLD accountant's epsilon); the
    returned value always meets the target.

    Parameters
    ----------
    epsilon : float
        Target epsilon, a finite number > 0.
    delta : float
        Target delta, in (0, 1).
    sampling_probability : float
        Poisson sampling rate of each step, in (0, 1].
    steps : int
        Number of steps, a positive integer.
    tolerance : float, optional
        Relative precision of the answer (default 1e-3).

    Returns
    -------
    float
        The noise multiplier.

    Raises
    ------
    labeldp.errors.ConfigError
        If an argument is out of range, or the target allows a noise multiplier below
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


def pate_epsilon(queries: int, noise_std: float, delta: float, threshold_noise_std: float | None = None) -> float:
    """Epsilon at ``delta`` of :func:`pate_event` (replace-one label), from dp_accounting's PLD accountant.

    Parameters
    ----------
    queries : int
        Number of queries, a positive integer.
    noise_std : float
        Standard deviation of the GNMax vote noise, > 0.
    delta : float
        Target delta, in (0, 1).
    threshold_noise_std : float or None, optional
        Standard deviation of the confident variant's threshold noise; None for plain GNMax.

    Returns
    -------
    float
        The epsilon at ``delta``.

    Raises
    ------
    labeldp.errors.ConfigError
        If ``delta`` is not in (0, 1), ``queries`` is not a positive integer, or a noise standard
        deviation is not > 0.
    """
    if not 0.0 < delta < 1.0:
        raise ConfigError(f"delta must lie in (0, 1), got {delta}")
    return accountant_epsilon(pate_event(queries, noise_std, threshold_noise_std), delta, GAUSSIAN_SHIFT_RELATION)


def calibrate_vote_noise(
    epsilon: float, delta: float, queries: int, threshold_noise_ratio: float | None = None, tolerance: float = 1e-3
) -> float:
    """The smallest GNMax vote noise sigma for which ``queries`` answers are (``epsilon``, ``delta``)-label-DP.

    The noise is found to a relative ``tolerance``, with threshold checks of noise
    ``threshold_noise_ratio * sigma`` if a ratio is given. The returned sigma always meets the target.

    Parameters
    ----------
    epsilon : float
        Target epsilon, a finite number > 0.
    delta : float
        Target delta, in (0, 1).
    queries : int
        Number of queries, a positive integer.
    threshold_noise_ratio : float or None, optional
        Ratio of the threshold noise to the vote noise, > 0; None for plain GNMax.
    tolerance : float, optional
        Relative precision of the answer (default 1e-3).

    Returns
    -------
    float
        The vote noise standard deviation sigma, in votes.

    Raises
    ------
    labeldp.errors.ConfigError
        If an argument is out of range, or no noise in :data:`NOISE_RANGE` meets the target.
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
    """The most queries that GNMax can answer within (``epsilon``, ``delta``); 0 if none.

    The queries are GNMax answers with vote noise ``noise_std`` (and threshold checks of noise
    ``threshold_noise_ratio * noise_std`` if a ratio is given), under replace-one-label neighbours.

    Q queries compose into one Gaussian whose noise multiplier shrinks as 1 / sqrt(Q), so the answer
    is (noise_std / sigma_1)^2 rounded down, sigma_1 being the noise one query needs; it is then
    checked (and lowered if the PLD's discretisation demands) against dp_accounting.

    Parameters
    ----------
    epsilon : float
        Target epsilon, a finite number > 0.
    delta : float
        Target delta, in (0, 1).
    noise_std : float
        Standard deviation of the GNMax vote noise, > 0.
    threshold_noise_ratio : float or None, optional
        Ratio of the threshold noise to the vote noise, > 0; None for plain GNMax.

    Returns
    -------
    int
        The number of queries, >= 0.

    Raises
    ------
    labeldp.errors.ConfigError
        If an argument is out of range.
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
    """One trial of a DP-SGD private selection.

    The DP-SGD steps, then a held-out count of correct predictions (sensitivity 1) with
    N(0, ``score_noise``^2) noise.

    Parameters
    ----------
    noise_multiplier : float
        DP-SGD's noise multiplier, >= 0.
    sampling_probability : float
        Poisson sampling rate of each step.
    steps : int
        Number of DP-SGD steps.
    score_noise : float
        Standard deviation of the noise on the count of correct predictions.

    Returns
    -------
    dp_accounting.dp_event.DpEvent
        ``ComposedDpEvent([dpsgd_event(...), GaussianDpEvent(score_noise)])``.

    Raises
    ------
    labeldp.errors.ConfigError
        If ``noise_multiplier`` is negative.
    """
    return dp_event.ComposedDpEvent(
        [dpsgd_event(noise_multiplier, sampling_probability, steps), dp_event.GaussianDpEvent(score_noise)]
    )


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
    """The smallest DP-SGD noise multiplier for which a private selection is (``epsilon``, ``delta``)-DP.

    The multiplier is found to a relative ``tolerance``. The selection is that of
    :func:`~labeldp.accounting.events.selection_event` over trials of :func:`selection_trial_event`,
    and its epsilon comes from dp_accounting's RDP accountant under add-or-remove-one-example
    neighbours (bisection with its ``calibrate_dp_mechanism``); the returned value always meets the
    target.

    Parameters
    ----------
    epsilon : float
        Target epsilon, a finite number > 0.
    delta : float
        Target delta, in (0, 1).
    sampling_probability : float
        Poisson sampling rate of each step, in (0, 1].
    steps : int
        Number of DP-SGD steps per trial, a positive integer.
    score_noise : float
        Standard deviation of the noise on each trial's score, > 0.
    mean : float
        Mean number of trials, a finite number > 1.
    shape : float
        Shape of the distribution of the number of trials, > 0 (inf: Poisson, 1: geometric).
    tolerance : float, optional
        Relative precision of the answer (default 1e-3).

    Returns
    -------
    float
        The noise multiplier (at least :data:`MIN_NOISE_MULTIPLIER`).

    Raises
    ------
    labeldp.errors.ConfigError
        If an argument is out of range, or the target cannot pay for the selection even with a noise
        multiplier of 1000 (the score's noise and the trials alone spend more).
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
