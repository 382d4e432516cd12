"""Randomized response (RR) and RR-with-prior (Ghazi et al., NeurIPS 2021, Algorithm 2).

Privacy guarantee (label DP, ``REPLACE_ONE``: neighbours differ in one example's label; inputs and
priors public): each released label is epsilon-DP with respect to its true label, *provided its prior
row does not depend on its own label* (a prior from public inputs, or from a model trained on other
examples' noisy labels). Examples are randomised independently: an array costs epsilon per example,
composed in parallel.
"""

from __future__ import annotations

import functools
import math
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


def rr_information(num_classes: int, epsilon: float) -> float:
    """I(Y; Z) in bits: what RR's label Z tells of a label Y drawn uniformly from ``num_classes`` classes."""
    k = check_num_classes(num_classes)
    eps = check_epsilon(epsilon)
    # Z is uniform: I = E ln(K Pr[z | y]); K Pr[z | y] is K keep where z = y, K keep e^-eps elsewhere
    kept = -math.log1p((k - 1) / k * math.expm1(-eps))
    return float((kept - change_probability(eps, k) * eps) / math.log(2))


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


def chunk_rows(num_classes: int) -> int:
    """Rows per RR-with-prior block: about :data:`_CHUNK_ENTRIES` entries, a multiple of :data:`_CHUNK_ROWS`."""
    return _CHUNK_ROWS * max(1, _CHUNK_ENTRIES // (num_classes * _CHUNK_ROWS))


def _top_k_blocks(prior: np.ndarray, epsilon: float):
    """(start, stop, (k, member)) for RR-with-prior's blocks of ``prior`` (member: a (K, m) mask)."""
    weights = keep_probability(epsilon, np.arange(1, prior.shape[1] + 1))
    return blocks_top_k(prior, weights, chunk_rows(prior.shape[1]))


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
    for start, stop, (block_k, member) in _top_k_blocks(prior, eps):
        k[start:stop], members[start:stop] = block_k, member.T
    return k, members


def rr_with_prior(labels, priors, epsilon: float, rng: RandomSource = None) -> tuple[np.ndarray, np.ndarray]:
    """RR-with-prior: RR restricted to the prior's top k labels; returns the releases and each k.

    A true label inside the top k is kept with probability e^eps / (e^eps + k - 1), else one of the other
    k - 1 is released uniformly; one outside gets a uniform label of the k. Each release is
    epsilon-label-DP as long as its prior row does not depend on its own label.

    The top-k sets and what the draws need of them draw nothing, so on a large input they are computed
    on the free cores (:mod:`labeldp.runtime`) while the noise is drawn on the calling thread, in a fixed
    order: a seeded generator gives the same releases whatever the threads.
    """
    eps = check_epsilon(epsilon)
    prior = check_priors(priors)
    true = check_labels(labels, prior.shape[1])
    n = check_same_length(labels=true, priors=prior)
    gen = as_generator(rng)
    noisy = np.empty(n, dtype=np.int64)
    ks = np.empty(n, dtype=np.int64)
    change = change_probability(eps, np.arange(prior.shape[1] + 1))  # by k
    weights = keep_probability(eps, np.arange(1, prior.shape[1] + 1))
    prepare = functools.partial(PriorBlock, true, change, ks)
    for start, stop, block in blocks_top_k(prior, weights, chunk_rows(prior.shape[1]), then=prepare):
        block.release(gen, noisy[start:stop])
    return noisy, ks


class PriorBlock:
    """One block of rows, ready to draw: its top-k sets without the true labels, and the draws'
    probabilities and ranges.

    Reads the block's true labels but draws nothing, so it may be built on a worker thread.
    """

    def __init__(self, true: np.ndarray, change: np.ndarray, ks: np.ndarray, start: int, stop: int, top: tuple):
        k, self.others = top  # (K, m): others[j, i] says whether label j is in row i's top k
        num_classes, m = self.others.shape
        ks[start:stop] = k
        self.y = true[start:stop]
        # by label (a C-order mask: rows of labels), else by row (the transpose of a C-order (m, K) mask)
        self.by_label = self.others.flags.c_contiguous
        if self.by_label:
            cells, at = self.others.reshape(-1), self.y * m + np.arange(m)
        else:
            cells, at = self.others.T.reshape(-1), np.arange(0, m * num_classes, num_classes) + self.y
        true_in_top_k = cells[at]
        cells[at] = False  # now the top k without the true label: the labels a changed release picks from
        self.outside = ~true_in_top_k
        self.probability = change[k]
        self.candidates = k - true_in_top_k
        if not self.by_label:  # row i's candidates are flat[first_i : first_i + candidates_i], in label order
            self.flat = np.flatnonzero(cells)
            self.first = np.cumsum(self.candidates) - self.candidates

    def release(self, gen, out: np.ndarray) -> None:
        """Draw the block's releases into ``out``, in runs of :data:`_CHUNK_ROWS` rows (so a seeded
        generator's releases do not depend on the block size): per run, its uniforms, then the ranks
        of the changed labels (uniform among the top k without the true label, in label order)."""
        num_classes, m = self.others.shape
        rank = np.full(m, num_classes, dtype=np.min_scalar_type(num_classes))  # K: kept
        for start in range(0, m, _CHUNK_ROWS):
            stop = min(start + _CHUNK_ROWS, m)
            redraw = np.flatnonzero(_changed(gen, self.probability[start:stop]) | self.outside[start:stop])
            if redraw.size:
                rank[start + redraw] = gen.integers(0, self.candidates[start:stop][redraw])
        self.place(rank, out)

    def place(self, rank: np.ndarray, out: np.ndarray) -> None:
        """Write into ``out`` each row's release: its true label where ``rank`` is K, else the label of that
        rank among its candidates."""
        num_classes, m = self.others.shape
        small = np.min_scalar_type(num_classes)
        if not self.by_label:
            out[:] = self.y
            rows = np.flatnonzero(rank < num_classes)
            out[rows] = self.flat[self.first[rows] + rank[rows]] - rows * num_classes
            return
        # the label of rank r is the number of labels j with at most r candidates among 0..j
        released, count = np.zeros(m, dtype=small), np.zeros(m, dtype=small)
        below = np.empty(m, dtype=bool)
        for row in self.others:
            count += row
            released += np.less_equal(count, rank, out=below)
        np.copyto(out, np.where(rank < num_classes, released, self.y))


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
