"""Noisy label histograms per group (e.g. per k-means cluster of public features).

Privacy guarantee (label DP, replace one label): the groups are public (computed from public
inputs), so replacing one example's label moves one count down and one count up inside its group:
L1 sensitivity 2 of the (groups x classes) count table. Discrete Laplace noise with parameter
a = epsilon / 2 on every cell (Pr[X = x] proportional to e^(-a |x|), sampled exactly by
:mod:`labeldp.mechanisms.discrete_laplace`) makes the table epsilon-DP. Where the labels of a privacy
unit of up to c rows change together, the sensitivity is 2c and a = epsilon / 2c.
"""

from __future__ import annotations

import numpy as np

from labeldp._validation import (
    check_contribution,
    check_epsilon,
    check_labels,
    check_num_classes,
    check_same_length,
)
from labeldp.mechanisms.discrete_laplace import discrete_laplace
from labeldp.randomness import RandomSource


def noisy_histogram(
    labels, groups, num_groups: int, num_classes: int, epsilon: float, rng: RandomSource = None, contribution: int = 1
) -> np.ndarray:
    """(num_groups, num_classes) label counts per group plus discrete Laplace noise (epsilon-label-DP).

    Each cell gets discrete Laplace noise with parameter epsilon / 2, which makes the table epsilon-DP
    provided the groups are public, computed without the labels (see the module docstring).

    Parameters
    ----------
    labels : array_like of int
        True labels, length n, in [0, num_classes).
    groups : array_like of int
        Public group of each example (e.g. its cluster), integers in [0, num_groups), length n.
    num_groups : int
        Number of groups (rows of the table).
    num_classes : int
        K, the number of classes (>= 2).
    epsilon : float
        Privacy parameter of the whole table, > 0.
    rng : None, int, str, numpy.random.Generator or labeldp.randomness.SecureGenerator, optional
        Source of the noise (see :mod:`labeldp.randomness`).
    contribution : int, optional
        The most labels one privacy unit has among the labels (default 1: each row its own unit); they
        change together between neighbouring datasets, so the noise covers ``contribution`` times the
        sensitivity of one label.

    Returns
    -------
    numpy.ndarray
        int64 noisy counts of shape (num_groups, num_classes) (may be negative; clip and normalise to
        use them as priors).

    Raises
    ------
    labeldp.errors.ConfigError
        If ``epsilon`` is not a finite number > 0, ``num_classes`` is not an integer >= 2, ``labels``
        or ``groups`` holds values outside their range, their lengths differ, or ``rng`` is not an
        accepted source.
    """
    eps = check_epsilon(epsilon)
    num_classes = check_num_classes(num_classes)
    true = check_labels(labels, num_classes)
    group = check_labels(groups, num_groups, "groups") if num_groups >= 1 else None
    check_same_length(labels=true, groups=group)
    counts = np.zeros((num_groups, num_classes), dtype=np.int64)
    np.add.at(counts, (group, true), 1)
    return counts + discrete_laplace(eps / (2.0 * check_contribution(contribution)), counts.shape, rng)
