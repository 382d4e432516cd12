"""Vector label privacy (VLP; Zhao et al., "Enhancing Learning with Label Differential Privacy by Vector
Approximation", ICLR 2025): each label y of K classes released as a random binary vector Z in {0, 1}^K.

Every coordinate is binary randomized response at epsilon / 2 on the one-hot bit 1[j = y]: Z_j = 1 with
probability p = e^(eps/2) / (1 + e^(eps/2)) where j = y, q = 1 - p elsewhere, independently.

Privacy guarantee (label DP, replace one label): two labels a, b change the distributions of Z_a and
Z_b only, each by binary RR at epsilon / 2, so Pr[z | a] / Pr[z | b] = (p / q)^(2 (z_a - z_b)) <= e^eps:
epsilon-label-DP per example. The release is a vector, not a label: as a function of the true class y,
Pr[z | y] is proportional to e^(eps z_y) (:func:`vector_labels_likelihood`).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import gammaln

from labeldp._validation import check_epsilon, check_labels, check_num_classes
from labeldp.errors import ConfigError
from labeldp.randomness import RandomSource, as_generator

#: the smallest positive float: a flip probability is floored there, so no coordinate is ever an identity
_TINY = np.nextafter(0.0, 1.0)
#: uniforms drawn at a time, in whole rows (32 MiB; a seeded generator gives the same draws whatever the size)
_CHUNK_ENTRIES = 1 << 22


def vector_flip_probability(epsilon: float) -> float:
    """q = 1 / (1 + e^(eps/2)): the chance each coordinate of the one-hot label is flipped (floored above 0)."""
    tail = math.exp(-check_epsilon(epsilon) / 2.0)
    return max(tail / (1.0 + tail), float(_TINY))


def vector_labels(labels, num_classes: int, epsilon: float, rng: RandomSource = None) -> np.ndarray:
    """(n, K) uint8 vectors: the one-hot label with each coordinate flipped independently with probability q,
    epsilon-label-DP each.

    A coordinate flips where a uniform on the 2^-53 grid falls below q: the realised q is q rounded up, so
    the realised epsilon, 2 ln((1 - q) / q), never exceeds the nominal one.
    """
    flip = vector_flip_probability(epsilon)
    k = check_num_classes(num_classes)
    true = check_labels(labels, k)
    gen = as_generator(rng)
    out = np.empty((true.size, k), dtype=np.uint8)
    rows = max(1, _CHUNK_ENTRIES // k)
    for start in range(0, true.size, rows):
        stop = min(start + rows, true.size)
        block = np.asarray(gen.random((stop - start, k))) < flip
        block[np.arange(stop - start), true[start:stop]] ^= True
        out[start:stop] = block
    return out


def vector_labels_probabilities(num_classes: int, epsilon: float) -> np.ndarray:
    """Exact (K, K) P[y, j] = Pr[Z_j = 1 | label y] of :func:`vector_labels` (the coordinates are independent)."""
    k = check_num_classes(num_classes)
    flip = vector_flip_probability(epsilon)
    probs = np.full((k, k), flip)
    np.fill_diagonal(probs, 1.0 - flip)
    return probs


def vector_information(num_classes: int, epsilon: float) -> float:
    """I(Y; Z) in bits: what one vector Z of :func:`vector_labels` tells of a label Y drawn uniformly from
    ``num_classes`` classes.

    The expectation of ln Pr[z | y] / Pr[z] over the label's own bit and the j ones among the other K - 1
    coordinates (Binomial(K - 1, q)), each term a log1p of Pr[z | y'] / Pr[z | y] = e^(eps (z_y' - z_y)):
    no cancellation at small epsilon, no overflow at large.
    """
    k = check_num_classes(num_classes)
    eps = check_epsilon(epsilon)
    flip = vector_flip_probability(eps)
    others = np.arange(k)
    log_weight = (
        gammaln(k)
        - gammaln(others + 1)
        - gammaln(k - others)
        + others * math.log(flip)
        + (k - 1 - others) * math.log1p(-flip)
    )
    kept = -np.log1p((k - 1 - others) / k * math.expm1(-eps))  # the label's own bit is 1
    if eps < 1.0:  # it is 0: -ln (K - j + j e^eps) / K, by log1p where that cancels
        flipped = -np.log1p(others / k * math.expm1(eps))
    else:
        with np.errstate(divide="ignore"):  # and without forming e^eps
            flipped = math.log(k) - np.logaddexp(np.log(k - others), np.log(others) + eps)
    return float(np.sum(np.exp(log_weight) * ((1.0 - flip) * kept + flip * flipped)) / math.log(2))


def _check_vectors(vectors) -> np.ndarray:
    z = np.asarray(vectors)
    if z.ndim != 2 or z.shape[1] < 2 or not np.isin(z, (0, 1)).all():
        raise ConfigError("vectors must be an (n, K) array of 0s and 1s, K >= 2")
    return z.astype(np.float64)


def vector_labels_log_probability(vectors, epsilon: float) -> np.ndarray:
    """Exact (n, K) ln Pr[Z = vectors[i] | label y] for every class y. Reads only releases: free of privacy cost."""
    z = _check_vectors(vectors)
    flip = vector_flip_probability(epsilon)
    log_q, log_p = math.log(flip), math.log1p(-flip)
    ones = z.sum(axis=1, keepdims=True)
    # the others: ones at q, zeros at 1 - q; the label's own coordinate: one at p, zero at 1 - p = q
    others = (ones - z) * log_q + (z.shape[1] - 1 - (ones - z)) * log_p
    return others + np.where(z > 0, log_p, log_q)


def vector_labels_likelihood(vectors, epsilon: float) -> np.ndarray:
    """(n, K) Pr[Z = vectors[i] | label y] normalised over y: e^(eps z_y) / sum_j e^(eps z_j). Free of
    privacy cost."""
    z = _check_vectors(vectors)
    weights = np.exp((z - 1.0) * check_epsilon(epsilon))
    return weights / weights.sum(axis=1, keepdims=True)


def vector_labels_one_hot_estimate(vectors, epsilon: float) -> np.ndarray:
    """(n, K) (Z - q) / (p - q): its expectation is the one-hot label, so its entry at a class estimates
    whether that is the label without bias. Free of privacy cost."""
    z = _check_vectors(vectors)
    flip = vector_flip_probability(epsilon)
    return (z - flip) / (1.0 - 2.0 * flip)
