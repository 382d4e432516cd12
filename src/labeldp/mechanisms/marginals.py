"""Noisy label marginals: for each of B public features, the label counts in each of its bins.

Privacy guarantee (label DP, replace one label): the bins are public (computed from public inputs)
and every example lies in exactly one bin of every feature, so replacing one example's label moves,
in each of the B features, the counts of one bin. With two classes only the positive count of each
bin is released (the bin's size is public, so its negatives are the size minus it): one cell per
feature moves by one, L1 sensitivity B. With K >= 3 classes two cells per feature move (one down,
one up), L1 sensitivity 2B. Discrete Laplace noise with parameter a = epsilon / (cells moved) on
every cell (Pr[X = x] proportional to e^(-a |x|)) makes the whole table epsilon-DP; the table is B
histograms (:mod:`labeldp.mechanisms.histogram`) at epsilon / B each, cheaper for two classes.
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
    """How many cells of the marginals one replaced label moves, each by one.

    Parameters
    ----------
    num_features : int
        B, the number of binned features.
    num_classes : int
        K, the number of classes.

    Returns
    -------
    int
        B with two classes (only the positive counts are released), 2B otherwise.
    """
    return int(num_features) * (1 if num_classes == 2 else 2)


def check_bins(bins, bins_per_feature) -> tuple[np.ndarray, np.ndarray]:
    """Check the bins of every example and the number of bins of every feature.

    Every index must lie inside its feature's bins.

    Parameters
    ----------
    bins : array_like of int
        (n, B) bin index of each example in each of the B features.
    bins_per_feature : array_like of int
        The number of bins of each feature, B positive integers.

    Returns
    -------
    bins : numpy.ndarray
        (n, B) int64 array of bin indices.
    bins_per_feature : numpy.ndarray
        (B,) int64 array.

    Raises
    ------
    labeldp.errors.ConfigError
        If ``bins`` is not an integer (n, B) array with B matching ``bins_per_feature``, a feature has
        no bin, or an index lies outside its feature's bins.
    """
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
    """Each (row, feature) bin as its row in the marginals' table: feature j's bins follow feature j - 1's.

    Parameters
    ----------
    bins : numpy.ndarray
        (n, B) int64 bin indices, checked by :func:`check_bins`.
    bins_per_feature : array_like of int
        (B,) the number of bins of each feature.

    Returns
    -------
    numpy.ndarray
        (n, B) int64 array of rows in [0, sum(bins_per_feature)).
    """
    return bins + np.concatenate([[0], np.cumsum(bins_per_feature)[:-1]]).astype(np.int64)


def marginal_counts(labels, bins, bins_per_feature, num_classes: int) -> np.ndarray:
    """The exact label counts per bin of every feature, feature 0's bins first.

    Not private: :func:`noisy_marginals` releases them.

    Parameters
    ----------
    labels : array_like of int
        True labels, length n, in [0, num_classes).
    bins : array_like of int
        (n, B) public bin of each example in each of the B features.
    bins_per_feature : array_like of int
        The number of bins of each feature (public).
    num_classes : int
        K, the number of classes (>= 2).

    Returns
    -------
    numpy.ndarray
        int64 array of shape (sum(bins_per_feature), num_classes).

    Raises
    ------
    labeldp.errors.ConfigError
        If ``num_classes``, ``labels`` or ``bins`` is invalid (see :func:`check_bins`), or ``labels``
        and ``bins`` differ in length.
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
    """Label counts per bin of every feature, noised so that the table is epsilon-label-DP.

    See the module docstring for the guarantee: it holds when the bins are public, computed from
    public inputs. Rows are the features' bins in order (feature 0's bins first).

    Parameters
    ----------
    labels : array_like of int
        True labels, length n, in [0, num_classes).
    bins : array_like of int
        (n, B) public bin of each example in each of the B features.
    bins_per_feature : array_like of int
        The number of bins of each feature (public).
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
        int64 noisy counts of shape (sum(bins_per_feature), num_classes). With two classes column 1 is
        noised and column 0 is the bin's size minus it; with more, every cell is noised. They may be
        negative: :func:`labeldp.priors.consistent_counts` projects them onto the bins' sizes.

    Raises
    ------
    labeldp.errors.ConfigError
        If ``epsilon`` is not a finite number > 0, an argument is invalid as for
        :func:`marginal_counts`, or ``rng`` is not an accepted source.
    """
    eps = check_epsilon(epsilon)
    counts = marginal_counts(labels, bins, bins_per_feature, num_classes)
    parameter = eps / (moved_cells(np.size(bins_per_feature), num_classes) * check_contribution(contribution))
    if num_classes == 2:
        positives = counts[:, 1] + discrete_laplace(parameter, counts.shape[0], rng)
        return np.stack([counts.sum(axis=1) - positives, positives], axis=1)
    return counts + discrete_laplace(parameter, counts.shape, rng)
