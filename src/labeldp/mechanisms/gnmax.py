"""PATE's vote aggregators: Gaussian noisy arg-max (GNMax) and its confident variant.

Teachers are trained on *disjoint* parts of the labelled data, and each votes a class for every
query. Privacy guarantee (label DP, replace one label): replacing one training label changes the
training set of one teacher only, so on every query at most one vote moves from one class to
another, two cells of the (queries x classes) vote histogram change by one each (L2 sensitivity
sqrt(2) per query) and the largest vote count changes by at most one (sensitivity 1). Hence

- GNMax, argmax(votes + N(0, sigma^2 I)), is post-processing of a Gaussian mechanism with noise
  multiplier sigma / sqrt(2) per query;
- the confident variant's check max(votes) + N(0, sigma_1^2) >= threshold is a Gaussian mechanism
  with noise multiplier sigma_1 per query (Papernot et al. 2018).

The assumption is that teacher t was trained on its own part only; the accounting lives in
:mod:`labeldp.accounting.calibration`.
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
    """``votes`` as a non-empty (queries, classes) integer array of non-negative counts.

    Parameters
    ----------
    votes : array_like of int
        Vote histogram of shape (queries, classes), at least 2 classes.

    Returns
    -------
    numpy.ndarray
        The votes as an int64 array of shape (queries, classes).

    Raises
    ------
    labeldp.errors.ConfigError
        If ``votes`` is not a non-empty 2-d array of non-negative integer counts with at least 2 classes.
    """
    array = np.asarray(votes)
    if array.ndim != 2 or array.shape[0] == 0 or array.shape[1] < 2:
        raise ConfigError(f"votes must have shape (queries, classes) with at least 2 classes, got {array.shape}")
    if array.dtype.kind not in "iu" or array.min() < 0:
        raise ConfigError("votes must be non-negative integer counts")
    return array.astype(np.int64)


def teacher_votes(predictions, num_classes: int) -> np.ndarray:
    """The vote histogram: ``predictions`` (teachers, queries) of class indices -> (queries, classes) counts.

    Parameters
    ----------
    predictions : array_like of int
        (teachers, queries) array: the class each teacher predicts for each query.
    num_classes : int
        K, the number of classes (>= 2).

    Returns
    -------
    numpy.ndarray
        int64 array of shape (queries, K): how many teachers voted for each class on each query.

    Raises
    ------
    labeldp.errors.ConfigError
        If ``num_classes`` is not an integer >= 2, or ``predictions`` is not a non-empty 2-d integer
        array of class indices in [0, num_classes).
    """
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
    """GNMax: for every query the arg-max of its votes plus independent N(0, noise_std^2) per class.

    Post-processing of a Gaussian mechanism with noise multiplier noise_std / sqrt(2) per query,
    provided each teacher was trained on its own disjoint part of the labels (see the module
    docstring).

    Parameters
    ----------
    votes : array_like of int
        (queries, classes) vote histogram of non-negative counts.
    noise_std : float
        Standard deviation sigma of the Gaussian noise added to each count, > 0.
    rng : None, int, str, numpy.random.Generator or labeldp.randomness.SecureGenerator, optional
        Source of the noise (see :mod:`labeldp.randomness`).

    Returns
    -------
    numpy.ndarray
        int64 array of shape (queries,): the answered class of each query.

    Raises
    ------
    labeldp.errors.ConfigError
        If ``votes`` is not a valid vote histogram, ``noise_std`` is not a finite number > 0, or ``rng``
        is not an accepted source.
    """
    counts = check_votes(votes)
    sigma = _check_std(noise_std, "noise_std")
    noisy = counts + as_generator(rng).normal(0.0, sigma, size=counts.shape)
    return noisy.argmax(axis=1)


def confident_gnmax(
    votes, threshold: float, threshold_noise_std: float, noise_std: float, rng: RandomSource = None
) -> tuple[np.ndarray, np.ndarray]:
    """Confident GNMax: answer a query only when max(votes) + N(0, threshold_noise_std^2) >= threshold.

    Answered queries are then answered with GNMax. The check is a Gaussian mechanism with noise
    multiplier threshold_noise_std per query (see the module docstring).

    The GNMax noise is drawn for every query, answered or not, so the randomness consumed does not
    depend on the data.

    Parameters
    ----------
    votes : array_like of int
        (queries, classes) vote histogram of non-negative counts.
    threshold : float
        The noisy largest vote count a query needs to be answered.
    threshold_noise_std : float
        Standard deviation sigma_1 of the noise of the check, > 0.
    noise_std : float
        Standard deviation sigma of the GNMax noise, > 0.
    rng : None, int, str, numpy.random.Generator or labeldp.randomness.SecureGenerator, optional
        Source of the noise (see :mod:`labeldp.randomness`).

    Returns
    -------
    answered : numpy.ndarray
        Boolean mask of shape (queries,).
    labels : numpy.ndarray
        int64 array of shape (queries,): the GNMax label, -1 where not answered.

    Raises
    ------
    labeldp.errors.ConfigError
        If ``votes`` is not a valid vote histogram, a noise standard deviation is not a finite number
        > 0, or ``rng`` is not an accepted source.
    """
    counts = check_votes(votes)
    sigma1 = _check_std(threshold_noise_std, "threshold_noise_std")
    gen = as_generator(rng)
    answered = counts.max(axis=1) + gen.normal(0.0, sigma1, size=counts.shape[0]) >= float(threshold)
    labels = gnmax(counts, noise_std, gen)
    return answered, np.where(answered, labels, -1)


def gnmax_probabilities(votes, noise_std: float, grid_points: int = 4001) -> np.ndarray:
    """Exact output distribution of :func:`gnmax`: (queries, classes) probabilities of each answer.

    Pr[answer j] = E_Z [ prod_{i != j} Phi((v_j - v_i) / sigma + Z) ], Z ~ N(0, 1), integrated on a
    uniform grid over [-12, 12] (the integrand is smooth; error far below 1e-9). For tests and
    analysis of small histograms: memory grows as queries x classes^2 x grid_points.

    Parameters
    ----------
    votes : array_like of int
        (queries, classes) vote histogram of non-negative counts.
    noise_std : float
        Standard deviation sigma of the GNMax noise, > 0.
    grid_points : int, optional
        Number of points of the integration grid (default 4001).

    Returns
    -------
    numpy.ndarray
        float64 array of shape (queries, classes); each row sums to 1.

    Raises
    ------
    labeldp.errors.ConfigError
        If ``votes`` is not a valid vote histogram or ``noise_std`` is not a finite number > 0.
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
    """Exact probability that :func:`confident_gnmax` answers each query: Phi((max - threshold) / sigma_1).

    Parameters
    ----------
    votes : array_like of int
        (queries, classes) vote histogram of non-negative counts.
    threshold : float
        The threshold of the check.
    threshold_noise_std : float
        Standard deviation sigma_1 of the noise of the check, > 0.

    Returns
    -------
    numpy.ndarray
        float64 array of shape (queries,).

    Raises
    ------
    labeldp.errors.ConfigError
        If ``votes`` is not a valid vote histogram or ``threshold_noise_std`` is not a finite number > 0.
    """
    counts = check_votes(votes)
    sigma1 = _check_std(threshold_noise_std, "threshold_noise_std")
    return ndtr((counts.max(axis=1) - float(threshold)) / sigma1)
