"""Noisy label histograms per group (e.g. per k-means cluster of public features).

Privacy guarantee (label DP, replace one label): the groups are public (computed from public
inputs), so replacing one example's label moves one count down and one count up inside its group:
L1 sensitivity 2 of the (groups x classes) count table. Discrete Laplace noise with parameter
a = epsilon / 2 on every cell (Pr[X = x] proportional to e^(-a |x|)) makes the table epsilon-DP.
"""

from __future__ import annotations

import numpy as np

from labeldp._validation import check_epsilon, check_labels, check_num_classes, check_same_length
from labeldp.randomness import RandomSource, as_generator


def discrete_laplace(parameter: float, size: int | tuple[int, ...], rng: RandomSource = None) -> np.ndarray:
    """Samples of the discrete Laplace distribution Pr[X = x] = tanh(a/2) e^(-a |x|), integers x.

    Drawn as the difference of two geometric variables by inversion of uniforms, so it works with
    every generator labeldp accepts (the secure one included).
    """
    if not parameter > 0:
        raise ValueError(f"discrete Laplace parameter must be > 0, got {parameter}")
    gen = as_generator(rng)
    shape = (size,) if np.isscalar(size) else tuple(size)
    count = int(np.prod(shape))
    # Geometric on {0, 1, ...} with Pr[G >= g] = e^(-a g): G = floor(log(U) / -a), U in (0, 1].
    uniforms = 1.0 - gen.random(2 * count)
    geometric = np.floor(np.log(uniforms) / -parameter).astype(np.int64)
    return (geometric[:count] - geometric[count:]).reshape(shape)


def discrete_laplace_pmf(values, parameter: float) -> np.ndarray:
    """Exact probabilities of :func:`discrete_laplace` at integer ``values``."""
    return np.tanh(parameter / 2) * np.exp(-parameter * np.abs(np.asarray(values, dtype=np.float64)))


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
