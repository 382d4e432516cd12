"""Laplace noise on the one-hot label, on an exact grid: the mechanism of ALIBI (Malek et al. 2021).

Privacy guarantee (label DP, replace one label): the release is z = onehot(y) + X / m, m =
:data:`LAPLACE_GRID`, with K independent discrete Laplace coordinates of parameter
a = epsilon / (2 m). Replacing y moves two coordinates of m z by m each, a privacy loss of at most
2 a m = epsilon. The noise has ALIBI's scale 2 / epsilon, but m z is an exact integer, so no
coordinate's floating-point representation tells the true label apart (Mironov 2012).

The release is a noisy vector, not a label: :func:`laplace_one_hot_likelihood` turns it into Pr[z | y].
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
    """The discrete Laplace parameter a = epsilon / (2 m) of each coordinate of m z."""
    return check_epsilon(epsilon) / (2 * LAPLACE_GRID)


def laplace_one_hot(labels, num_classes: int, epsilon: float, rng: RandomSource = None) -> np.ndarray:
    """(n, K) noisy one-hot vectors onehot(label) + discrete Laplace / m, exact multiples of 1 / m:
    epsilon-label-DP each.
    """
    k = check_num_classes(num_classes)
    true = check_labels(labels, k)
    counts = discrete_laplace(laplace_parameter(epsilon), (true.size, k), rng)
    counts[np.arange(true.size), true] += LAPLACE_GRID
    return counts / LAPLACE_GRID


def laplace_one_hot_likelihood(noisy, epsilon: float) -> np.ndarray:
    """Pr[z | y] for every class y, normalised over y: exp(epsilon (|z_y| - |z_y - 1|) / 2) up to a common
    factor. Free of privacy cost.
    """
    z = np.asarray(noisy, dtype=np.float64)
    if z.ndim != 2 or not np.all(np.isfinite(z)):
        raise ConfigError("noisy must be a finite (n, K) array")
    log_lik = (np.abs(z) - np.abs(z - 1.0)) * (check_epsilon(epsilon) / 2.0)
    likelihood = np.exp(log_lik - log_lik.max(axis=1, keepdims=True))
    return likelihood / likelihood.sum(axis=1, keepdims=True)
