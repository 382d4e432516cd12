"""PATE's vote aggregators: Gaussian noisy arg-max (GNMax) and its confident variant.

Privacy guarantee (label DP, replace one label), assuming each teacher was trained on its own
*disjoint* part of the labels: one replaced label changes one teacher, so on every query one vote
moves between classes (L2 sensitivity sqrt(2) of the vote histogram) and the largest count moves by
at most one. GNMax, argmax(votes + N(0, sigma^2 I)), is thus post-processing of a Gaussian mechanism
with noise multiplier sigma / sqrt(2) per query; the confident check
max(votes) + N(0, sigma_1^2) >= threshold one with multiplier sigma_1 (Papernot et al. 2018). The
accounting lives in :mod:`labeldp.accounting.calibration`.
"""

from __future__ import annotations

import numpy as np
from scipy.special import log_ndtr, ndtr

from labeldp._validation import check_num_classes
from labeldp.errors import ConfigError
from labeldp.randomness import RandomSource, as_generator


def _check_std(value: float, name: str) -> float:
    value = float(value)
    if not value > 0 or not np.isfinite(value):
        raise ConfigError(f"{name} must be a finite number > 0, got {value}")
    return value


def check_votes(votes) -> np.ndarray:
    """``votes`` as a non-empty int64 (queries, classes >= 2) array of non-negative counts."""
    array = np.asarray(votes)
    if array.ndim != 2 or array.shape[0] == 0 or array.shape[1] < 2:
        raise ConfigError(f"votes must have shape (queries, classes) with at least 2 classes, got {array.shape}")
    if array.dtype.kind not in "iu" or array.min() < 0:
        raise ConfigError("votes must be non-negative integer counts")
    return array.astype(np.int64)


def teacher_votes(predictions, num_classes: int) -> np.ndarray:
    """The (queries, K) vote histogram of (teachers, queries) predicted class indices."""
    num_classes = check_num_classes(num_classes)
    array = np.asarray(predictions)
    if array.ndim != 2 or array.size == 0 or array.dtype.kind not in "iu":
        raise ConfigError(f"predictions must be a non-empty (teachers, queries) integer array, got {array.shape}")
    if array.min() < 0 or array.max() >= num_classes:
        raise ConfigError(f"predictions must be class indices in [0, {num_classes})")
    queries = array.shape[1]
    flat = (np.arange(queries) * num_classes + array.astype(np.int64)).ravel()
    return np.bincount(flat, minlength=queries * num_classes).reshape(queries, num_classes)


def gnmax(votes, noise_std: float, rng: RandomSource = None) -> np.ndarray:
    """GNMax: each query's arg-max of its votes plus N(0, noise_std^2) per class (see the module docstring)."""
    counts = check_votes(votes)
    sigma = _check_std(noise_std, "noise_std")
    noisy = counts + as_generator(rng).normal(0.0, sigma, size=counts.shape)
    return noisy.argmax(axis=1)


def confident_gnmax(
    votes, threshold: float, threshold_noise_std: float, noise_std: float, rng: RandomSource = None
) -> tuple[np.ndarray, np.ndarray]:
    """Confident GNMax: (answered mask, GNMax label or -1) per query; a query is answered when
    max(votes) + N(0, threshold_noise_std^2) >= threshold.

    The GNMax noise is drawn for every query, answered or not, so the randomness consumed does not depend
    on the data.
    """
    counts = check_votes(votes)
    sigma1 = _check_std(threshold_noise_std, "threshold_noise_std")
    gen = as_generator(rng)
    answered = counts.max(axis=1) + gen.normal(0.0, sigma1, size=counts.shape[0]) >= float(threshold)
    labels = gnmax(counts, noise_std, gen)
    return answered, np.where(answered, labels, -1)


def gnmax_probabilities(votes, noise_std: float, grid_points: int = 4001) -> np.ndarray:
    """Exact (queries, classes) output distribution of :func:`gnmax`.

    Pr[answer j] = E_Z [prod_{i != j} Phi((v_j - v_i) / sigma + Z)], Z ~ N(0, 1), integrated on
    ``grid_points`` points of [-12, 12] (error far below 1e-9). For tests and small histograms: memory
    grows as queries x classes^2 x grid_points.
    """
    counts = check_votes(votes).astype(np.float64)
    sigma = _check_std(noise_std, "noise_std")
    z = np.linspace(-12.0, 12.0, grid_points)
    gaps = (counts[:, :, None] - counts[:, None, :]) / sigma  # [q, j, i] = (v_j - v_i) / sigma
    log_cdf = log_ndtr(gaps[..., None] + z)  # [q, j, i, grid]
    classes = counts.shape[1]
    log_cdf[:, np.arange(classes), np.arange(classes), :] = 0.0  # leave out i == j
    integrand = np.exp(log_cdf.sum(axis=2) - 0.5 * z**2) / np.sqrt(2 * np.pi)
    probs = np.trapezoid(integrand, z, axis=-1)
    return probs / probs.sum(axis=1, keepdims=True)


def answer_probability(votes, threshold: float, threshold_noise_std: float) -> np.ndarray:
    """Exact probability that :func:`confident_gnmax` answers each query: Phi((max - threshold) / sigma_1)."""
    counts = check_votes(votes)
    sigma1 = _check_std(threshold_noise_std, "threshold_noise_std")
    return ndtr((counts.max(axis=1) - float(threshold)) / sigma1)
