"""Laplace noise on the one-hot label, on an exact grid: the mechanism of ALIBI (Malek et al. 2021).

Privacy guarantee (label DP, replace one label): the released vector is z = onehot(y) + X / m, where
m = :data:`LAPLACE_GRID` and the K coordinates of X are independent discrete Laplace variables with
parameter a = epsilon / (2 m) (:mod:`labeldp.mechanisms.discrete_laplace`). Replacing y by y' moves two
coordinates of m z by m each, and a discrete Laplace variable shifted by m has privacy loss at most
a m = epsilon / 2, so the release is epsilon-DP. It is the Laplace mechanism of ALIBI on the grid
(1/m) Z: the noise has scale b = 2 / epsilon in label units, as in the paper, and m z is an integer,
computed exactly, so no coordinate's floating-point representation tells the true label apart
(Mironov 2012; ALIBI's continuous noise, fl(1 + L) next to fl(L), does).

What is released is the noisy vector, not a label: a learner turns it into a posterior over labels,
Pr[y | z] proportional to prior(y) x Pr[z | y] (:func:`laplace_one_hot_likelihood`).
"""

from __future__ import annotations

import numpy as np

from labeldp._validation import check_epsilon, check_labels, check_num_classes
from labeldp.errors import ConfigError
from labeldp.mechanisms.discrete_laplace import discrete_laplace
from labeldp.randomness import RandomSource

#: grid points per unit of a label coordinate (a power of two: every released value k / m is exact)
LAPLACE_GRID = 1024


def laplace_parameter(epsilon: float) -> float:
    """The discrete Laplace parameter a = epsilon / (2 m) of each coordinate of m z.

    Parameters
    ----------
    epsilon : float
        Privacy parameter, > 0.

    Returns
    -------
    float
        The parameter a, with m = :data:`LAPLACE_GRID`.

    Raises
    ------
    labeldp.errors.ConfigError
        If ``epsilon`` is not a finite number > 0.
    """
    return check_epsilon(epsilon) / (2 * LAPLACE_GRID)


def laplace_one_hot(labels, num_classes: int, epsilon: float, rng: RandomSource = None) -> np.ndarray:
    """(n, K) noisy one-hot vectors on the grid (1/m) Z: onehot(label) + discrete Laplace / m.

    The noise has scale 2 / epsilon per coordinate (float64, exact). Each released vector is
    epsilon-label-DP (see the module docstring).

    Parameters
    ----------
    labels : array_like of int
        1-d integer array of true labels in [0, num_classes), shape (n,).
    num_classes : int
        K, the number of classes (>= 2).
    epsilon : float
        Privacy parameter, > 0.
    rng : None, int, str, numpy.random.Generator or labeldp.randomness.SecureGenerator, optional
        Source of the noise (see :mod:`labeldp.randomness`).

    Returns
    -------
    numpy.ndarray
        float64 array z of shape (n, K), every entry a multiple of 1 / :data:`LAPLACE_GRID`.

    Raises
    ------
    labeldp.errors.ConfigError
        If ``num_classes`` is not an integer >= 2, ``labels`` is not a 1-d array of integers in
        [0, num_classes), ``epsilon`` is not a finite number > 0, or ``rng`` is not an accepted source.
    """
    k = check_num_classes(num_classes)
    true = check_labels(labels, k)
    counts = discrete_laplace(laplace_parameter(epsilon), (true.size, k), rng)
    counts[np.arange(true.size), true] += LAPLACE_GRID
    return counts / LAPLACE_GRID


def laplace_one_hot_likelihood(noisy, epsilon: float) -> np.ndarray:
    """Pr[z | y] for every class y, normalised over y.

    Equal to exp(epsilon (|z_y| - |z_y - 1|) / 2) up to a factor common to all classes (only
    coordinate y differs between the candidate one-hot vectors). Uses only released values and public
    parameters.

    Parameters
    ----------
    noisy : array_like
        (n, K) vectors released by :func:`laplace_one_hot`.
    epsilon : float
        The privacy parameter of the release, > 0.

    Returns
    -------
    numpy.ndarray
        float64 array of shape (n, K); each row sums to 1.

    Raises
    ------
    labeldp.errors.ConfigError
        If ``noisy`` is not a finite (n, K) array or ``epsilon`` is not a finite number > 0.
    """
    z = np.asarray(noisy, dtype=np.float64)
    if z.ndim != 2 or not np.all(np.isfinite(z)):
        raise ConfigError("noisy must be a finite (n, K) array")
    log_lik = (np.abs(z) - np.abs(z - 1.0)) * (check_epsilon(epsilon) / 2.0)
    likelihood = np.exp(log_lik - log_lik.max(axis=1, keepdims=True))
    return likelihood / likelihood.sum(axis=1, keepdims=True)
