"""Every privacy spend labeldp records, as a ``dp_accounting`` event: small immutable data, one
constructor per mechanism, and the neighbouring relations they are stated under.

- label DP, the default: *replace one label* -- two datasets are neighbours when they have the same
  inputs and differ in the label of exactly one example (``NeighboringRelation.REPLACE_ONE``);
- full DP (DP-SGD): *add or remove one example*, inputs and label together
  (``NeighboringRelation.ADD_OR_REMOVE_ONE``), the relation DP-SGD is usually stated under.

What each event means, and how its epsilon is computed, is :mod:`labeldp.accounting.ledger`'s job.
"""

from __future__ import annotations

import math

import dp_accounting
import numpy as np
from dp_accounting import dp_event

from labeldp.errors import ConfigError
from labeldp.mechanisms.laplace import LAPLACE_GRID, laplace_parameter
from labeldp.mechanisms.marginals import moved_cells

NEIGHBORING_RELATION = dp_accounting.NeighboringRelation.REPLACE_ONE
DPSGD_RELATION = dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE
RELATION_NAMES = {
    NEIGHBORING_RELATION: "replace-one label",
    DPSGD_RELATION: "add-or-remove one example",
}
#: dp_accounting's Gaussian PLD for a query that moves by (at most) its sensitivity between neighbours.
#: Under REPLACE_ONE, dp_accounting assumes a move of twice the sensitivity (a replaced example in a
#: sum of clipped vectors), which is not what a GaussianDpEvent on the label ledger means.
GAUSSIAN_SHIFT_RELATION = dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE


def histogram_event(epsilon: float, contribution: int = 1) -> dp_event.DpEvent:
    """The event of a per-group label histogram with discrete Laplace(epsilon / 2) noise on every cell.

    Replacing one label moves two cells by one, two independent unit shifts: the table is epsilon-DP
    under replace-one-label neighbours when its groups are public.

    Parameters
    ----------
    epsilon : float
        The privacy parameter the histogram was released with.
    contribution : int, optional
        The most labels one privacy unit has among the members (default 1: each row its own unit); they
        change together between neighbouring datasets, so the noise covers ``contribution`` times the
        sensitivity of one label.

    Returns
    -------
    dp_accounting.dp_event.DpEvent
        ``SelfComposedDpEvent(DiscreteLaplaceDpEvent(epsilon / 2, 1), 2)``; for c = ``contribution`` > 1,
        ``DiscreteLaplaceDpEvent(epsilon / 2c, 2c)`` (c labels replaced move the table by 2c in L1).
    """
    if contribution > 1:
        return dp_event.DiscreteLaplaceDpEvent(epsilon / (2.0 * contribution), 2 * int(contribution))
    return dp_event.SelfComposedDpEvent(dp_event.DiscreteLaplaceDpEvent(epsilon / 2.0, 1), 2)


def marginals_event(epsilon: float, num_features: int, num_classes: int, contribution: int = 1) -> dp_event.DpEvent:
    """The event of noisy label marginals over ``num_features`` public features.

    Noisy label marginals (:mod:`labeldp.mechanisms.marginals`): a table of counts whose L1 sensitivity
    is m (one replaced label moves m cells by one: m = B with two classes, 2B with more) with discrete
    Laplace(epsilon / m) noise on every cell. The ledger accounts discrete Laplace as the pure
    epsilon-DP guarantee (parameter x sensitivity), which holds for the whole table; recorded as m unit
    shifts composed, its PLD would lose epsilon at delta = 0 to truncation on a wide table (tens of
    cells).

    Parameters
    ----------
    epsilon : float
        The privacy parameter the table was released with.
    num_features : int
        B, the number of binned public features.
    num_classes : int
        K, the number of classes.
    contribution : int, optional
        The most labels one privacy unit has among the members (default 1: each row its own unit); they
        change together between neighbouring datasets, so the noise covers ``contribution`` times the
        sensitivity of one label.

    Returns
    -------
    dp_accounting.dp_event.DpEvent
        ``DiscreteLaplaceDpEvent(epsilon / m, m)``, m the cells moved times ``contribution``.
    """
    cells = moved_cells(num_features, num_classes) * int(contribution)
    return dp_event.DiscreteLaplaceDpEvent(epsilon / cells, cells)


def hashed_counts_event(epsilon: float, num_slots: int, num_classes: int, contribution: int = 1) -> dp_event.DpEvent:
    """The event of noisy label counts over hashed features (:mod:`labeldp.mechanisms.hashed_counts`).

    Every row lies in one bucket of each of its F slots, so one replaced label moves the released
    cells by at most m = F in L1 with two classes (2F with more), c times that for a privacy unit of c
    rows (two slots hashed to one bucket move it by two: the L1 bound holds all the same). Discrete
    Laplace(epsilon / m) on every cell is then epsilon-DP, accounted as that pure guarantee, like the
    marginals (:func:`marginals_event`).

    Parameters
    ----------
    epsilon : float
        The privacy parameter the table was released with.
    num_slots : int
        F, the number of hashed slots.
    num_classes : int
        K, the number of classes.
    contribution : int, optional
        c, the most rows of one privacy unit among the members (default 1).

    Returns
    -------
    dp_accounting.dp_event.DpEvent
        ``DiscreteLaplaceDpEvent(epsilon / m, m)``, m the L1 sensitivity.
    """
    return marginals_event(epsilon, num_slots, num_classes, contribution)


def laplace_one_hot_event(epsilon: float) -> dp_event.DpEvent:
    """The event of ALIBI's release on the grid (1/m) Z.

    The release is m onehot(y) plus discrete Laplace(epsilon / (2m)) per coordinate; replacing the
    label shifts two coordinates by m, two independent shifts, so it is epsilon-label-DP.

    Parameters
    ----------
    epsilon : float
        The privacy parameter the vectors were released with, > 0.

    Returns
    -------
    dp_accounting.dp_event.DpEvent
        ``SelfComposedDpEvent(DiscreteLaplaceDpEvent(epsilon / (2m), m), 2)``, m = ``LAPLACE_GRID``.

    Raises
    ------
    labeldp.errors.ConfigError
        If ``epsilon`` is not a finite number > 0.
    """
    return dp_event.SelfComposedDpEvent(dp_event.DiscreteLaplaceDpEvent(laplace_parameter(epsilon), LAPLACE_GRID), 2)


def laplace_value_event(epsilon: float, steps: int) -> dp_event.DpEvent:
    """The event of a numeric label released with discrete Laplace noise on an evenly spaced grid.

    A numeric label released on a grid of ``steps`` + 1 evenly spaced values with discrete Laplace
    noise of parameter epsilon / steps per step: replacing the label moves the value by at most
    ``steps`` steps (:mod:`labeldp.mechanisms.laplace_value`), so the release is epsilon-DP.

    Parameters
    ----------
    epsilon : float
        The privacy parameter the labels were released with.
    steps : int
        G - 1, the number of grid steps the label range spans (>= 1).

    Returns
    -------
    dp_accounting.dp_event.DpEvent
        ``DiscreteLaplaceDpEvent(epsilon / steps, steps)``.

    Raises
    ------
    labeldp.errors.ConfigError
        If ``steps`` is below 1.
    """
    steps = int(steps)
    if steps < 1:
        raise ConfigError(f"a label range spans at least one grid step, got {steps}")
    return dp_event.DiscreteLaplaceDpEvent(epsilon / steps, steps)


def rr_on_sets_event(epsilon: float, sizes) -> dp_event.DpEvent:
    """RR inside a public set of each example's own: RR-with-prior's top k classes, RR-on-bins' d bins.

    Every example's pair of output distributions under two labels is dominated by RR over its own set
    (two labels inside it are exactly RR; a label outside releases a uniform member, a mixture of RR
    outputs; two labels outside release the same distribution), and RR's privacy profile at a fixed
    epsilon decreases in the number of buckets, so the event is RR over the smallest size >= 2. If
    every set has one member, no release depends on a label: no event.

    Parameters
    ----------
    epsilon : float
        The mechanism's epsilon.
    sizes : int or array-like of int
        The sets' sizes (k or d), one number or one per example. They depend on public priors only.

    Returns
    -------
    dp_accounting.dp_event.DpEvent
        ``RandomizedResponseDpEvent`` over the smallest size >= 2, or ``NoOpDpEvent``.
    """
    d = np.atleast_1d(np.asarray(sizes, dtype=np.int64))
    informative = d[d >= 2]
    return randomized_response_event(epsilon, int(informative.min())) if informative.size else dp_event.NoOpDpEvent()


def stated_event(epsilon: float) -> dp_event.DpEvent:
    """The event of a pure epsilon-DP guarantee stated by a source outside labeldp (labels randomized by
    a browser's or an operating system's measurement API): recorded, never drawn here.

    The ledger accounts ``LaplaceDpEvent(b)`` as the pure (1 / b, 0)-DP guarantee, which is what such a
    statement gives, whatever the source's mechanism.

    Parameters
    ----------
    epsilon : float
        The epsilon the source states, > 0.

    Returns
    -------
    dp_accounting.dp_event.DpEvent
        ``LaplaceDpEvent(1 / epsilon)``.
    """
    return dp_event.LaplaceDpEvent(1.0 / epsilon)


def randomized_response_event(epsilon: float, num_buckets: int) -> dp_event.DpEvent:
    """The dp_accounting event of RR over ``num_buckets`` values that keeps with e^eps/(e^eps+k-1).

    dp_accounting's RR keeps the input with probability 1 - p and otherwise outputs a uniform bucket
    (possibly the input), so p = k / (e^eps + k - 1) gives the same distribution.

    Parameters
    ----------
    epsilon : float
        The privacy parameter of the release.
    num_buckets : int
        k, the number of values RR chooses among (1: a constant, no privacy cost).

    Returns
    -------
    dp_accounting.dp_event.DpEvent
        ``RandomizedResponseDpEvent(p, k)``, or ``NoOpDpEvent`` for k = 1.
    """
    k = int(num_buckets)
    if k == 1:
        return dp_event.NoOpDpEvent()
    noise = k * math.exp(-epsilon) / (1.0 + (k - 1) * math.exp(-epsilon))
    return dp_event.RandomizedResponseDpEvent(noise_parameter=noise, num_buckets=k)


def non_private_event() -> dp_event.DpEvent:
    """True labels handed out without noise: the ledger's epsilon becomes infinite.

    Returns
    -------
    dp_accounting.dp_event.DpEvent
        A ``NonPrivateDpEvent``.
    """
    return dp_event.NonPrivateDpEvent()


def check_queries(queries: int) -> int:
    """Check that ``queries`` is a positive integer.

    Parameters
    ----------
    queries : int
        A number of queries.

    Returns
    -------
    int
        ``queries`` as an int.

    Raises
    ------
    labeldp.errors.ConfigError
        If ``queries`` is not a positive integer.
    """
    if int(queries) != queries or queries < 1:
        raise ConfigError(f"queries must be a positive integer, got {queries}")
    return int(queries)


def pate_event(queries: int, noise_std: float, threshold_noise_std: float | None = None) -> dp_event.DpEvent:
    """The dp_accounting event of PATE's aggregator.

    :mod:`labeldp.accounting.calibration` explains the charge: ``queries`` GNMax answers with vote
    noise ``noise_std``, each a ``GaussianDpEvent(noise_std / sqrt(2))`` (and, for the confident
    variant, as many threshold checks with noise ``threshold_noise_std``, each a
    ``GaussianDpEvent(threshold_noise_std)``). It holds under replace-one-label neighbours when every
    teacher was trained on its own disjoint part of the labels.

    Parameters
    ----------
    queries : int
        Number of queries, fixed before any vote is seen; each is charged whether or not it is answered.
    noise_std : float
        Standard deviation of the GNMax vote noise, > 0.
    threshold_noise_std : float or None, optional
        Standard deviation of the confident variant's threshold noise, > 0; None for plain GNMax.

    Returns
    -------
    dp_accounting.dp_event.DpEvent
        A ``SelfComposedDpEvent`` of the answers, composed with one of the checks if there are any.

    Raises
    ------
    labeldp.errors.ConfigError
        If ``queries`` is not a positive integer or a noise standard deviation is not > 0.
    """
    count = check_queries(queries)
    if not noise_std > 0:
        raise ConfigError(f"noise_std must be > 0, got {noise_std}")
    answers = dp_event.SelfComposedDpEvent(dp_event.GaussianDpEvent(noise_std / math.sqrt(2.0)), count)
    if threshold_noise_std is None:
        return answers
    if not threshold_noise_std > 0:
        raise ConfigError(f"threshold_noise_std must be > 0, got {threshold_noise_std}")
    checks = dp_event.SelfComposedDpEvent(dp_event.GaussianDpEvent(threshold_noise_std), count)
    return dp_event.ComposedDpEvent([checks, answers])


def gaussian_equivalent(event: dp_event.DpEvent) -> dp_event.GaussianDpEvent | None:
    """The one Gaussian mechanism that a composition of (unsampled) Gaussian mechanisms equals.

    Gaussians with noise multipliers s_i compose into exactly one with multiplier
    (sum_i s_i^-2)^(-1/2): their privacy loss distributions are Gaussian, and means and variances add.
    One PLD of it is far cheaper than composing the parts' discretised PLDs (PATE's hundreds of
    queries) and no less exact.

    Parameters
    ----------
    event : dp_accounting.dp_event.DpEvent
        Any event.

    Returns
    -------
    dp_accounting.dp_event.GaussianDpEvent or None
        The equivalent Gaussian, or None for any other event (including a Gaussian without noise).
    """
    if isinstance(event, dp_event.GaussianDpEvent):
        return event if event.noise_multiplier > 0 else None
    if isinstance(event, dp_event.SelfComposedDpEvent) and event.count > 0:
        inner = gaussian_equivalent(event.event)
        return None if inner is None else dp_event.GaussianDpEvent(inner.noise_multiplier / math.sqrt(event.count))
    if isinstance(event, dp_event.ComposedDpEvent) and event.events:
        parts = [gaussian_equivalent(part) for part in event.events]
        if any(part is None for part in parts):
            return None
        return dp_event.GaussianDpEvent(math.fsum(part.noise_multiplier**-2 for part in parts) ** -0.5)
    return None


def dpsgd_event(noise_multiplier: float, sampling_probability: float, steps: int) -> dp_event.DpEvent:
    """The dp_accounting event of ``steps`` Poisson-sampled Gaussian steps.

    Stated under add-or-remove-one-example neighbours (:data:`DPSGD_RELATION`), the clipping bound
    folded into the noise multiplier.

    Parameters
    ----------
    noise_multiplier : float
        The ratio sigma of the noise's standard deviation to the clipping bound, >= 0 (0: no privacy).
    sampling_probability : float
        The Poisson sampling rate q of each step.
    steps : int
        Number of steps.

    Returns
    -------
    dp_accounting.dp_event.DpEvent
        ``SelfComposedDpEvent(PoissonSampledDpEvent(q, GaussianDpEvent(sigma)), steps)``.

    Raises
    ------
    labeldp.errors.ConfigError
        If ``noise_multiplier`` is negative or NaN.
    """
    if not noise_multiplier >= 0:
        raise ConfigError(f"noise_multiplier must be >= 0, got {noise_multiplier}")
    step = dp_event.PoissonSampledDpEvent(sampling_probability, dp_event.GaussianDpEvent(noise_multiplier))
    return dp_event.SelfComposedDpEvent(step, int(steps))


def selection_event(trial: dp_event.DpEvent, mean: float, shape: float) -> dp_event.DpEvent:
    """The event of a private selection over repetitions of ``trial``.

    Private selection (Papernot & Steinke 2022): ``trial`` repeated a random number of times (mean
    ``mean``; ``shape`` inf: Poisson, 1: geometric, otherwise truncated negative binomial), only the
    best output kept. Accounted with Renyi DP (dp_accounting's RDP accountant).

    Parameters
    ----------
    trial : dp_accounting.dp_event.DpEvent
        The event of one trial.
    mean : float
        The mean number of trials, a finite number > 1.
    shape : float
        The shape of the distribution of the number of trials, > 0 (inf: Poisson, 1: geometric).

    Returns
    -------
    dp_accounting.dp_event.DpEvent
        ``RepeatAndSelectDpEvent(trial, mean, shape)``.

    Raises
    ------
    labeldp.errors.ConfigError
        If ``mean`` is not a finite number > 1 or ``shape`` is not > 0.
    """
    if not math.isfinite(mean) or mean <= 1:
        raise ConfigError(
            f"the selection's mean number of trials must be a finite number > 1 (a mean of 1 is a "
            f"single trial: no selection), got {mean}"
        )
    if not shape > 0:
        raise ConfigError(f"the selection's shape must be > 0 (inf: Poisson, 1: geometric), got {shape}")
    return dp_event.RepeatAndSelectDpEvent(trial, float(mean), float(shape))
