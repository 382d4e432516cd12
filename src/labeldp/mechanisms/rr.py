"""Randomized response (RR) and RR-with-prior (Ghazi et al., NeurIPS 2021, Algorithm 2).

Privacy guarantee (label DP, ``REPLACE_ONE``: neighbours differ in one example's label; inputs and
priors public): each released label is epsilon-DP with respect to its true label, *provided its prior
row does not depend on its own label* (a prior from public inputs, or from a model trained on other
examples' noisy labels). Examples are randomised independently: an array costs epsilon per example,
composed in parallel.
"""

from __future__ import annotations

from typing import overload

import numpy as np

from labeldp._validation import (
    check_epsilon,
    check_labels,
    check_num_classes,
    check_priors,
    check_same_length,
)
from labeldp.errors import ConfigError
from labeldp.mechanisms._top_k import blocks_top_k
from labeldp.randomness import RandomSource, as_generator

# Rows processed at a time by RR-with-prior: at least _CHUNK_ROWS, about _CHUNK_ENTRIES prior
# entries (a 4 MiB block: memory stays bounded at any K, and per-block overheads stay small at K = 10).
_CHUNK_ROWS = 1 << 13
_CHUNK_ENTRIES = 1 << 19
#: the smallest positive float (a uniform on the 2^-53 grid falls below it with probability 2^-53)
_TINY = np.nextafter(0.0, 1.0)


@overload
def keep_probability(epsilon: float, k: int) -> float: ...
@overload
def keep_probability(epsilon: float, k: np.ndarray) -> np.ndarray: ...
def keep_probability(epsilon: float, k) -> np.ndarray | float:
    """e^eps / (e^eps + k - 1), the chance RR over k candidates keeps the true label (overflow-free): a float
    for one k, an array for an array of them."""
    return 1.0 / (1.0 + (np.asarray(k, dtype=np.float64) - 1.0) * np.exp(-epsilon))


def change_probability(epsilon: float, k) -> np.ndarray:
    """(k - 1) / (e^eps + k - 1), computed without cancellation; 0 where k <= 1 (an array of k's shape: 0-d
    for one k).

    Floored at the smallest positive float while k > 1, so a label can still change where e^-eps
    underflows (epsilon above about 745).
    """
    candidates = np.asarray(k, dtype=np.float64)
    others = (candidates - 1.0) * np.exp(-epsilon)
    return np.where(candidates > 1, np.maximum(others / (1.0 + others), _TINY), 0.0)


def _changed(gen, probability) -> np.ndarray:
    """Which labels RR changes: a uniform on the 2^-53 grid of [0, 1) below ``probability``.

    The realised probability is ``probability`` rounded *up* to that grid, so the realised epsilon never
    exceeds the recorded one. (Drawing "keep if U < keep probability" instead would keep every label once
    it rounds to 1.0, above epsilon 36.7 for K = 2: an identity recorded as finite epsilon.)
    """
    probability = np.asarray(probability, dtype=np.float64)
    return gen.random(probability.size) < probability


def randomized_response(labels, num_classes: int, epsilon: float, rng: RandomSource = None) -> np.ndarray:
    """Release each label by K-ary randomized response: epsilon-label-DP per example.

    The true label is kept with probability e^eps / (e^eps + K - 1), else one of the K - 1 others is
    released uniformly; the realised epsilon is at most the nominal one (see :func:`_changed`).
    """
    eps = check_epsilon(epsilon)
    num_classes = check_num_classes(num_classes)
    true = check_labels(labels, num_classes)
    gen = as_generator(rng)
    changed = _changed(gen, np.full(true.size, change_probability(eps, num_classes)))
    shift = gen.integers(1, num_classes, size=true.size)
    return np.where(changed, (true + shift) % num_classes, true)


def _chunk_rows(num_classes: int) -> int:
    """Rows per RR-with-prior block: about :data:`_CHUNK_ENTRIES` entries, a multiple of :data:`_CHUNK_ROWS`."""
    return _CHUNK_ROWS * max(1, _CHUNK_ENTRIES // (num_classes * _CHUNK_ROWS))


def _top_k_blocks(prior: np.ndarray, epsilon: float):
    """(start, stop, (k, member, flat)) for RR-with-prior's blocks of ``prior``."""
    weights = keep_probability(epsilon, np.arange(1, prior.shape[1] + 1))
    return blocks_top_k(prior, weights, _chunk_rows(prior.shape[1]))


def prior_top_k(priors, epsilon: float) -> tuple[np.ndarray, np.ndarray]:
    """The k and top-k label set (boolean (n, K) mask) RR-with-prior uses for each prior row.

    k maximises keep_probability(eps, k) times the mass of the k largest entries, as float64 computes it
    (entries added in descending order); ties go to the smallest k, and among equal entries lower labels
    rank first. Reads no labels: free of privacy cost.
    """
    eps = check_epsilon(epsilon)
    prior = check_priors(priors)
    k = np.empty(prior.shape[0], dtype=np.int64)
    members = np.empty(prior.shape, dtype=bool)
    for start, stop, (block_k, member, _) in _top_k_blocks(prior, eps):
        k[start:stop], members[start:stop] = block_k, member
    return k, members


def rr_with_prior(labels, priors, epsilon: float, rng: RandomSource = None) -> tuple[np.ndarray, np.ndarray]:
    """RR-with-prior: RR restricted to the prior's top k labels; returns the releases and each k.

    A true label inside the top k is kept with probability e^eps / (e^eps + k - 1), else one of the other
    k - 1 is released uniformly; one outside gets a uniform label of the k. Each release is
    epsilon-label-DP as long as its prior row does not depend on its own label.

    The top-k sets read no labels and draw nothing, so on a large input they are computed on the free
    cores (:mod:`labeldp.runtime`) while the noise is drawn on the calling thread, in a fixed order: a
    seeded generator gives the same releases whatever the threads.
    """
    eps = check_epsilon(epsilon)
    prior = check_priors(priors)
    true = check_labels(labels, prior.shape[1])
    n = check_same_length(labels=true, priors=prior)
    gen = as_generator(rng)
    num_classes = prior.shape[1]
    noisy = np.empty(n, dtype=np.int64)
    ks = np.empty(n, dtype=np.int64)
    change = change_probability(eps, np.arange(num_classes + 1))  # by k
    for start, stop, (k, member, flat) in _top_k_blocks(prior, eps):
        y = true[start:stop]
        row_start = np.arange(0, (stop - start) * num_classes, num_classes)  # row i's cells in member
        true_in_top_k = member.reshape(-1)[row_start + y]
        rank = _released_ranks(gen, true_in_top_k, k, change)
        # A changed label is the member of the drawn rank among the top k without the true label, in
        # label order; row i's members are flat[first_i : first_i + k_i]. The r-th one is the r-th
        # member, or the (r + 1)-th where the true label is a member at or below it.
        changed = rank >= 0
        at = np.cumsum(k) - k + np.maximum(rank, 0)
        at += changed & true_in_top_k & (flat[at] - row_start >= y)
        noisy[start:stop] = np.where(changed, flat[at] - row_start, y)
        ks[start:stop] = k
    return noisy, ks


def _released_ranks(gen, true_in_top_k: np.ndarray, k: np.ndarray, change: np.ndarray) -> np.ndarray:
    """One block's draws: -1 where the true label is kept, else the released label's (uniform) rank among
    the top k without the true label.

    Drawn in runs of :data:`_CHUNK_ROWS` rows, so a seeded generator's releases do not depend on the
    block size.
    """
    rank = np.full(k.size, -1, dtype=np.int64)
    probability, outside = change[k], ~true_in_top_k
    candidates = k - true_in_top_k  # the top k without the true label
    for start in range(0, k.size, _CHUNK_ROWS):
        stop = min(start + _CHUNK_ROWS, k.size)
        redraw = np.flatnonzero(_changed(gen, probability[start:stop]) | outside[start:stop])
        if redraw.size:
            rank[start + redraw] = gen.integers(0, candidates[start:stop][redraw])
    return rank


def rr_with_prior_probabilities(priors, epsilon: float) -> np.ndarray:
    """Exact (n, K, K) release probabilities of :func:`rr_with_prior`: P[i, y, z] = Pr[y -> z] under row i."""
    eps = check_epsilon(epsilon)
    k, member = prior_top_k(priors, eps)
    keep = keep_probability(eps, k)
    other = change_probability(eps, k) / np.maximum(k - 1, 1)
    in_set_rows = member[:, None, :] * other[:, None, None]
    out_of_set_rows = np.broadcast_to(member[:, None, :] / k[:, None, None], in_set_rows.shape)
    probs = np.where(member[:, :, None], in_set_rows, out_of_set_rows)
    rows, labels = np.nonzero(member)
    probs[rows, labels, labels] = keep[rows]
    return probs


def randomized_response_probabilities(num_classes: int, epsilon: float) -> np.ndarray:
    """Exact (K, K) release probabilities of :func:`randomized_response`: P[y, z] = Pr[y -> z]."""
    eps = check_epsilon(epsilon)
    num_classes = check_num_classes(num_classes)
    keep = keep_probability(eps, num_classes)
    probs = np.full((num_classes, num_classes), change_probability(eps, num_classes) / (num_classes - 1))
    np.fill_diagonal(probs, keep)
    return probs


def randomized_response_likelihood(noisy_labels, num_classes: int, epsilon: float) -> np.ndarray:
    """L[i, y] = Pr[RR releases noisy_labels[i] | true label y], shape (n, K): the noise channel of the
    forward correction. Reads only releases and public parameters: free of privacy cost.
    """
    eps = check_epsilon(epsilon)
    num_classes = check_num_classes(num_classes)
    noisy = check_labels(noisy_labels, num_classes, "noisy_labels")
    keep = keep_probability(eps, num_classes)
    likelihood = np.full((noisy.size, num_classes), change_probability(eps, num_classes) / (num_classes - 1))
    likelihood[np.arange(noisy.size), noisy] = keep
    return likelihood


def rr_with_prior_likelihood(noisy_labels, priors, epsilon: float) -> np.ndarray:
    """L[i, y] = Pr[RR-with-prior releases noisy_labels[i] | true label y] under prior row i, shape (n, K).

    A row of :func:`rr_with_prior_probabilities` without building the (n, K, K) array; free of privacy
    cost. A released label outside its prior's top k (not an RR-with-prior release) raises ConfigError.
    """
    eps = check_epsilon(epsilon)
    k, member = prior_top_k(priors, eps)
    noisy = check_labels(noisy_labels, member.shape[1], "noisy_labels")
    check_same_length(noisy_labels=noisy, priors=member)
    rows = np.arange(noisy.size)
    if not member[rows, noisy].all():
        raise ConfigError("noisy_labels contains a label outside its prior's top k: not an RR-with-prior release")
    keep = keep_probability(eps, k)
    other = change_probability(eps, k) / np.maximum(k - 1, 1)
    likelihood = np.where(member, other[:, None], 1.0 / k[:, None])  # true label outside the top k: 1/k
    likelihood[rows, noisy] = keep
    return likelihood
