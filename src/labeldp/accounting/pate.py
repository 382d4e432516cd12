"""Accounting for PATE's aggregators (GNMax and confident GNMax), data-independent.

Under replace-one-label neighbours, one replaced label changes one teacher, so on every query two
cells of the vote histogram move by one (L2 sensitivity sqrt(2)) and the largest count by at most
one. One GNMax answer with vote noise N(0, sigma^2) is therefore ``GaussianDpEvent(sigma / sqrt(2))``
and one confident threshold check with noise N(0, sigma_1^2) is ``GaussianDpEvent(sigma_1)``
(:mod:`labeldp.mechanisms.gnmax`).

The number of queries is fixed before any vote is seen, and every query is charged for both its
threshold check and its GNMax answer whether or not it passes the check: the guarantee then holds
whatever the teachers' consensus. (PATE's data-dependent analysis, Papernot et al. 2018, charges
consensual queries less, but its epsilon depends on the votes and must itself be released privately;
labeldp does not implement it.) Gaussian mechanisms compose exactly into one Gaussian, which
dp_accounting's PLD accountant (and the ledger) use. Epsilons come from dp_accounting's Gaussian
PLD for a query that moves by its sensitivity (``GAUSSIAN_SHIFT_RELATION``), as the ledger builds it.
"""

from __future__ import annotations

import math

from dp_accounting import dp_event

from labeldp.accounting.calibration import accountant_epsilon, check_target, smallest_noise
from labeldp.accounting.ledger import GAUSSIAN_SHIFT_RELATION

#: Noise standard deviations are in votes; calibration looks for them in this range.
NOISE_RANGE = (1e-2, 1e7)


def _check_queries(queries: int) -> int:
    if int(queries) != queries or queries < 1:
        raise ValueError(f"queries must be a positive integer, got {queries}")
    return int(queries)


def pate_event(queries: int, noise_std: float, threshold_noise_std: float | None = None) -> dp_event.DpEvent:
    """The dp_accounting event of ``queries`` GNMax answers with vote noise ``noise_std`` (and, for
    the confident variant, as many threshold checks with noise ``threshold_noise_std``)."""
    count = _check_queries(queries)
    if not noise_std > 0:
        raise ValueError(f"noise_std must be > 0, got {noise_std}")
    answers = dp_event.SelfComposedDpEvent(dp_event.GaussianDpEvent(noise_std / math.sqrt(2.0)), count)
    if threshold_noise_std is None:
        return answers
    if not threshold_noise_std > 0:
        raise ValueError(f"threshold_noise_std must be > 0, got {threshold_noise_std}")
    checks = dp_event.SelfComposedDpEvent(dp_event.GaussianDpEvent(threshold_noise_std), count)
    return dp_event.ComposedDpEvent([checks, answers])


def pate_epsilon(queries: int, noise_std: float, delta: float, threshold_noise_std: float | None = None) -> float:
    """Epsilon at ``delta`` of :func:`pate_event` (replace-one label), from dp_accounting's PLD accountant."""
    if not 0.0 < delta < 1.0:
        raise ValueError(f"delta must lie in (0, 1), got {delta}")
    return accountant_epsilon(pate_event(queries, noise_std, threshold_noise_std), delta, GAUSSIAN_SHIFT_RELATION)


def calibrate_vote_noise(epsilon: float, delta: float, queries: int, threshold_noise_ratio: float | None = None,
                         tolerance: float = 1e-3) -> float:
    """The smallest GNMax vote noise sigma (to a relative ``tolerance``) for which ``queries`` answers,
    with threshold checks of noise ``threshold_noise_ratio * sigma`` if a ratio is given, are
    (``epsilon``, ``delta``)-label-DP. The returned sigma always meets the target."""
    _check_queries(queries)
    check_target(epsilon, delta)
    if threshold_noise_ratio is not None and not threshold_noise_ratio > 0:
        raise ValueError(f"threshold_noise_ratio must be > 0, got {threshold_noise_ratio}")

    def event(sigma: float) -> dp_event.DpEvent:
        return pate_event(queries, sigma, None if threshold_noise_ratio is None else threshold_noise_ratio * sigma)

    # Start where the composition equals one Gaussian with noise multiplier 1.
    per_query = 2.0 + (0.0 if threshold_noise_ratio is None else threshold_noise_ratio**-2)
    return smallest_noise(event, epsilon, delta, GAUSSIAN_SHIFT_RELATION, minimum=NOISE_RANGE[0],
                          maximum=NOISE_RANGE[1], start=math.sqrt(queries * per_query), tolerance=tolerance)





def max_queries(epsilon: float, delta: float, noise_std: float, threshold_noise_ratio: float | None = None) -> int:
    """The most queries that GNMax with vote noise ``noise_std`` (and threshold checks of noise
    ``threshold_noise_ratio * noise_std``) can answer within (``epsilon``, ``delta``); 0 if none.

    Q queries compose into one Gaussian whose noise multiplier shrinks as 1 / sqrt(Q), so the answer
    is (noise_std / sigma_1)^2 rounded down, sigma_1 being the noise one query needs; it is then
    checked (and lowered if the PLD's discretisation demands) against dp_accounting.
    """
    check_target(epsilon, delta)
    single = calibrate_vote_noise(epsilon, delta, 1, threshold_noise_ratio)
    queries = int((noise_std / single) ** 2)
    threshold = None if threshold_noise_ratio is None else threshold_noise_ratio * noise_std
    while queries > 0 and pate_epsilon(queries, noise_std, delta, threshold) > epsilon:
        queries -= 1
    return queries
