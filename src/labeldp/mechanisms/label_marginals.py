"""Noisy label marginals: for each of B public features, the label counts in each of its bins.

Privacy guarantee (label DP, replace one label), bins computed from public inputs: every example lies
in one bin per feature, so one replaced label moves one cell per feature with two classes (only
positive counts are released: a bin's size is public), L1 sensitivity B, and two cells per feature
with more, 2B. Discrete Laplace noise with a = epsilon / (cells moved) on every cell makes the table
epsilon-DP: B histograms (:mod:`labeldp.mechanisms.histogram`) at epsilon / B, cheaper for two classes.
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


def moved_cells(num_features: int, num_classes: int) -> int:
    """How many cells one replaced label moves by one: B with two classes, 2B otherwise."""
    return int(num_features) * (1 if num_classes == 2 else 2)


def check_bins(bins, bins_per_feature) -> tuple[np.ndarray, np.ndarray]:
    """The (n, B) int64 bins and (B,) bins per feature, every index inside its feature's bins."""
    codes = np.asarray(bins)
    sizes = np.asarray(bins_per_feature, dtype=np.int64).reshape(-1)
    if codes.ndim != 2 or codes.shape[1] != sizes.size or sizes.size == 0:
        raise ConfigError(f"bins must be an (n, B) array with B = {sizes.size} features, got shape {codes.shape}")
    if not np.issubdtype(codes.dtype, np.integer) or np.any(sizes < 1):
        raise ConfigError("bins must be integer indices and every feature must have at least one bin")
    if codes.size and (codes.min() < 0 or np.any(codes.max(axis=0) >= sizes)):
        raise ConfigError("every bin index must lie in [0, bins of its feature)")
    return codes.astype(np.int64), sizes


def flat_bins(bins: np.ndarray, bins_per_feature) -> np.ndarray:
    """Each (row, feature) bin as its row of the marginals' table (feature j's bins after j - 1's)."""
    return bins + np.concatenate([[0], np.cumsum(bins_per_feature)[:-1]]).astype(np.int64)


def marginal_counts(labels, bins, bins_per_feature, num_classes: int) -> np.ndarray:
    """The exact (sum(bins_per_feature), K) label counts per bin, feature 0's first (not private: see
    :func:`noisy_marginals`).
    """
    num_classes = check_num_classes(num_classes)
    true = check_labels(labels, num_classes)
    codes, sizes = check_bins(bins, bins_per_feature)
    check_same_length(labels=true, bins=codes)
    rows = flat_bins(codes, sizes).ravel()
    counts = np.zeros((int(sizes.sum()), num_classes), dtype=np.int64)
    np.add.at(counts, (rows, np.repeat(true, codes.shape[1])), 1)
    return counts


def noisy_marginals(
    labels, bins, bins_per_feature, num_classes: int, epsilon: float, rng: RandomSource = None, contribution: int = 1
) -> np.ndarray:
    """The label counts of :func:`marginal_counts`, noised so that the table is epsilon-label-DP.

    With two classes column 1 is noised and column 0 is the bin's size minus it. Counts may be negative:
    :func:`labeldp.priors.consistent_counts` projects them onto the bins' sizes. ``contribution`` is the
    most labels of one privacy unit (default 1).
    """
    eps = check_epsilon(epsilon)
    counts = marginal_counts(labels, bins, bins_per_feature, num_classes)
    parameter = eps / (moved_cells(np.size(bins_per_feature), num_classes) * check_contribution(contribution))
    if num_classes == 2:
        positives = counts[:, 1] + discrete_laplace(parameter, counts.shape[0], rng)
        return np.stack([counts.sum(axis=1) - positives, positives], axis=1)
    return counts + discrete_laplace(parameter, counts.shape, rng)
