"""Noisy label histograms per group (e.g. per k-means cluster of public features).

Privacy guarantee (label DP, replace one label): the groups are public (computed from public
inputs), so replacing one example's label moves one count down and one count up inside its group:
L1 sensitivity 2 of the (groups x classes) count table. Discrete Laplace noise with parameter
a = epsilon / 2 on every cell (Pr[X = x] proportional to e^(-a |x|), sampled exactly by
:mod:`labeldp.mechanisms.discrete_laplace`) makes the table epsilon-DP.
"""

from __future__ import annotations

import numpy as np

from labeldp._validation import check_epsilon, check_labels, check_num_classes, check_same_length
from labeldp.mechanisms.discrete_laplace import discrete_laplace
from labeldp.randomness import RandomSource


def noisy_histogram(labels, groups, num_groups: int, num_classes: int, epsilon: float,
                    rng: RandomSource = None) -> np.ndarray:
    """(num_groups, num_classes) label counts per group plus discrete Laplace noise (epsilon-label-DP).

    Args:
        labels: true labels, length n.
        groups: public group of each example (e.g. its cluster), integers in [0, num_groups).
        epsilon: privacy parameter of the whole table, > 0.

    Returns:
        int64 noisy counts (may be negative; clip and normalise to use them as priors).
    """
    eps = check_epsilon(epsilon)
    num_classes = check_num_classes(num_classes)
    true = check_labels(labels, num_classes)
    group = check_labels(groups, num_groups, "groups") if num_groups >= 1 else None
    check_same_length(labels=true, groups=group)
    counts = np.zeros((num_groups, num_classes), dtype=np.int64)
    np.add.at(counts, (group, true), 1)
    return counts + discrete_laplace(eps / 2.0, counts.shape, rng)
