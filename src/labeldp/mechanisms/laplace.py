"""Laplace noise on the one-hot label: the mechanism of ALIBI (Malek et al. 2021).

Privacy guarantee (label DP, replace one label): the released vector is onehot(y) + Laplace(b) noise
on each of the K coordinates, independently. Replacing y by y' moves two coordinates by one each
(L1 sensitivity 2), so b = 2 / epsilon makes the release epsilon-DP; the privacy loss is exactly
that of two independent unit-shifted Laplace(b) coordinates, each (1 / b)-DP.

What is released is the noisy vector, not a label: a learner turns it into a posterior over labels,
Pr[y | z] proportional to prior(y) x Pr[z | y] (:func:`laplace_one_hot_likelihood`).
"""

from __future__ import annotations

import numpy as np

from labeldp._validation import check_epsilon, check_labels, check_num_classes
from labeldp.randomness import RandomSource, as_generator


def laplace_scale(epsilon: float) -> float:
    """The per-coordinate Laplace scale b = 2 / epsilon."""
    return 2.0 / check_epsilon(epsilon)


def laplace(scale: float, size: int | tuple[int, ...], rng: RandomSource = None) -> np.ndarray:
    """Laplace(0, scale) samples, the difference of two exponentials drawn by inversion of uniforms
    (works with every generator labeldp accepts, the secure one included)."""
    if not scale > 0:
        raise ValueError(f"Laplace scale must be > 0, got {scale}")
    gen = as_generator(rng)
    shape = (size,) if np.isscalar(size) else tuple(size)
    count = int(np.prod(shape))
    exponentials = -np.log(1.0 - gen.random(2 * count)) * scale  # 1 - U lies in (0, 1]
    return (exponentials[:count] - exponentials[count:]).reshape(shape)


def laplace_one_hot(labels, num_classes: int, epsilon: float, rng: RandomSource = None) -> np.ndarray:
    """(n, K) noisy one-hot vectors: onehot(label) + Laplace(2 / epsilon) on every coordinate."""
    k = check_num_classes(num_classes)
    true = check_labels(labels, k)
    noisy = laplace(laplace_scale(epsilon), (true.size, k), rng)
    noisy[np.arange(true.size), true] += 1.0
    return noisy


def laplace_one_hot_likelihood(noisy, epsilon: float) -> np.ndarray:
    """Pr[z | y] for every class y, normalised over y: exp((|z_y| - |z_y - 1|) / b) up to a factor
    common to all classes (only coordinate y differs between the candidate one-hot vectors)."""
    z = np.asarray(noisy, dtype=np.float64)
    if z.ndim != 2 or not np.all(np.isfinite(z)):
        raise ValueError("noisy must be a finite (n, K) array")
    log_lik = (np.abs(z) - np.abs(z - 1.0)) / laplace_scale(epsilon)
    likelihood = np.exp(log_lik - log_lik.max(axis=1, keepdims=True))
    return likelihood / likelihood.sum(axis=1, keepdims=True)
