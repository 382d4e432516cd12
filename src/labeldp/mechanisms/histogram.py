"""Noisy label histograms per public group (e.g. per k-means cluster of public features).

Privacy guarantee (label DP, replace one label), groups computed without the labels: one replaced
label moves one count down and one up in its group, L1 sensitivity 2 (2c for a privacy unit of up to
c rows), so discrete Laplace noise with a = epsilon / 2c on every cell makes the table epsilon-DP.
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
from labeldp.errors import ConfigError
from labeldp.mechanisms.discrete_laplace import discrete_laplace
from labeldp.randomness import RandomSource


def noisy_histogram(
    labels, groups, num_groups: int, num_classes: int, epsilon: float, rng: RandomSource = None, contribution: int = 1
) -> np.ndarray:
    """(num_groups, K) int64 label counts per group plus discrete Laplace noise: epsilon-label-DP.

    Counts may be negative (clip and normalise to use them as priors). ``contribution`` is the most
    labels of one privacy unit (default 1).
    """
    eps = check_epsilon(epsilon)
    num_classes = check_num_classes(num_classes)
    true = check_labels(labels, num_classes)
    if num_groups < 1:
        raise ConfigError(f"num_groups must be at least 1, got {num_groups}")
    group = check_labels(groups, num_groups, "groups")
    check_same_length(labels=true, groups=group)
    counts = np.zeros((num_groups, num_classes), dtype=np.int64)
    np.add.at(counts, (group, true), 1)
    return counts + discrete_laplace(eps / (2.0 * check_contribution(contribution)), counts.shape, rng)
