"""Randomized response (RR) and RR-with-prior (Ghazi et al., NeurIPS 2021, Algorithm 2).

Privacy guarantee (label DP): two datasets are neighbours when they differ in the label of one
example (``REPLACE_ONE`` in dp_accounting terms); inputs and priors are public. For each example the
released label satisfies epsilon-DP with respect to its true label, *provided its prior does not
depend on its own label* (a prior computed from public inputs, or from a model trained on other
examples' noisy labels). Examples are randomised independently, so releasing a whole array costs
epsilon per example, composed in parallel across disjoint examples.

All functions are vectorised over examples; there is no per-example Python loop.
"""

from __future__ import annotations

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


def keep_probability(epsilon: float, k) -> np.ndarray | float:
    """Probability e^eps / (e^eps + k - 1) that RR over k candidates releases the true label.

    Computed as 1 / (1 + (k - 1) e^-eps), which does not overflow for large epsilon.

    Parameters
    ----------
    epsilon : float
        Privacy parameter (not checked here).
    k : int or numpy.ndarray
        Number of candidate labels, a scalar or an integer array of any shape.

    Returns
    -------
    numpy.ndarray or float
        The keep probability, float64, with the shape of ``k``.
    """
    return 1.0 / (1.0 + (np.asarray(k, dtype=np.float64) - 1.0) * np.exp(-epsilon))


def change_probability(epsilon: float, k) -> np.ndarray | float:
    """Probability (k - 1) / (e^eps + k - 1) that RR over k candidates releases another label.

    Computed without the cancellation of 1 - :func:`keep_probability`. Where e^-eps underflows
    (epsilon above about 745) it is the smallest positive float, not 0, while k > 1.

    Parameters
    ----------
    epsilon : float
        Privacy parameter (not checked here).
    k : int or numpy.ndarray
        Number of candidate labels, a scalar or an integer array of any shape.

    Returns
    -------
    numpy.ndarray or float
        The change probability, float64, with the shape of ``k``; 0 where k <= 1.
    """
    candidates = np.asarray(k, dtype=np.float64)
    others = (candidates - 1.0) * np.exp(-epsilon)
    return np.where(candidates > 1, np.maximum(others / (1.0 + others), _TINY), 0.0)


def _changed(gen, probability) -> np.ndarray:
    """Which labels RR changes: a uniform on the 2^-53 grid of [0, 1) below ``probability``.

    The realised probability is ``probability`` rounded *up* to that grid, so the realised keep
    probability never exceeds the nominal one and the realised epsilon never exceeds the recorded
    one. (Drawing "keep if U < e^eps / (e^eps + k - 1)" instead would keep every label once that
    probability rounds to 1.0, above epsilon 36.7 for K = 2: an identity recorded as finite epsilon.)
    """
    probability = np.asarray(probability, dtype=np.float64)
    return gen.random(probability.size) < probability


def randomized_response(labels, num_classes: int, epsilon: float, rng: RandomSource = None) -> np.ndarray:
    """Release each label by K-ary randomized response (epsilon-label-DP per example).

    With probability e^eps / (e^eps + K - 1) the true label is kept, otherwise one of the K - 1
    *other* labels is released uniformly at random. The likelihood ratio between any two true labels
    for any released label is exactly e^eps (the realised one at most that: see :func:`_changed`).

    Parameters
    ----------
    labels : array_like of int
        1-d integer array of true labels in [0, num_classes), shape (n,).
    num_classes : int
        K, the number of classes (>= 2).
    epsilon : float
        Privacy parameter, > 0.
    rng : None, int, str, numpy.random.Generator or labeldp.randomness.SecureGenerator, optional
        Seed, ``numpy.random.Generator``, ``"secure"`` or None (see :mod:`labeldp.randomness`).

    Returns
    -------
    numpy.ndarray
        int64 array of released labels, same shape as ``labels``.

    Raises
    ------
    labeldp.errors.ConfigError
        If ``epsilon`` is not a finite number > 0, ``num_classes`` is not an integer >= 2, ``labels``
        is not a 1-d array of integers in [0, num_classes), or ``rng`` is not an accepted source.
    """
    eps = check_epsilon(epsilon)
    num_classes = check_num_classes(num_classes)
    true = check_labels(labels, num_classes)
    gen = as_generator(rng)
    changed = _changed(gen, np.full(true.size, change_probability(eps, num_classes)))
    shift = gen.integers(1, num_classes, size=true.size)
    return np.where(changed, (true + shift) % num_classes, true)


def _chunk_rows(num_classes: int) -> int:
    """Rows per block of RR-with-prior: about :data:`_CHUNK_ENTRIES` prior entries, a multiple of
    :data:`_CHUNK_ROWS` rows."""
    return _CHUNK_ROWS * max(1, _CHUNK_ENTRIES // (num_classes * _CHUNK_ROWS))


def _top_k_blocks(prior: np.ndarray, epsilon: float):
    """(start, stop, (k, member, flat)) for RR-with-prior's blocks of ``prior`` (mechanisms/_top_k.py)."""
    weights = keep_probability(epsilon, np.arange(1, prior.shape[1] + 1))
    return blocks_top_k(prior, weights, _chunk_rows(prior.shape[1]))


def prior_top_k(priors, epsilon: float) -> tuple[np.ndarray, np.ndarray]:
    """The k and the top-k label set that RR-with-prior uses for each row of ``priors``.

    k maximises keep_probability(eps, k) times the mass of the k largest prior entries, as float64
    computes it (the entries added in descending order); ties go to the smallest k. Among equal prior
    entries, lower label indices rank first (a fixed, public order). Reads no labels, so it is free of
    privacy cost.

    Parameters
    ----------
    priors : array_like
        (n, K) array; each row a probability distribution over the K classes.
    epsilon : float
        Privacy parameter, > 0.

    Returns
    -------
    k : numpy.ndarray
        int64 array of shape (n,).
    in_top_k : numpy.ndarray
        Boolean mask of shape (n, K).

    Raises
    ------
    labeldp.errors.ConfigError
        If ``epsilon`` is not a finite number > 0 or ``priors`` is not an (n, K) array of
        probability distributions.
    """
    eps = check_epsilon(epsilon)
    prior = check_priors(priors)
    k = np.empty(prior.shape[0], dtype=np.int64)
    members = np.empty(prior.shape, dtype=bool)
    for start, stop, (block_k, member, _) in _top_k_blocks(prior, eps):
        k[start:stop], members[start:stop] = block_k, member
    return k, members


def rr_with_prior(labels, priors, epsilon: float, rng: RandomSource = None) -> tuple[np.ndarray, np.ndarray]:
    """RR-with-prior (Algorithm 2 of Ghazi et al. 2021): RR restricted to the prior's top k labels.

    For each example, k is chosen to maximise e^eps/(e^eps+k-1) times the prior mass of the k most
    likely labels (smallest k on ties). If the true label is among those k it is kept with
    probability e^eps/(e^eps+k-1), else one of the other k-1 is released uniformly; if it is not
    among them, a uniform label from the k is released. Each release is epsilon-label-DP as long as
    the prior row does not depend on that example's own label.

    The top-k sets read no labels and draw nothing: on a large input they are computed on the free
    cores (labeldp's thread policy, :mod:`labeldp.runtime`) while the noise is drawn on the calling
    thread, in the same order whatever the threads, so a seeded generator gives the same releases.

    Parameters
    ----------
    labels : array_like of int
        1-d integer array of true labels, length n.
    priors : array_like
        (n, K) array; each row a probability distribution over the K classes.
    epsilon : float
        Privacy parameter, > 0.
    rng : None, int, str, numpy.random.Generator or labeldp.randomness.SecureGenerator, optional
        Seed, ``numpy.random.Generator``, ``"secure"`` or None.

    Returns
    -------
    noisy_labels : numpy.ndarray
        int64 array of shape (n,), the released labels.
    k : numpy.ndarray
        int64 array of shape (n,), the size of each example's top-k set.

    Raises
    ------
    labeldp.errors.ConfigError
        If ``epsilon`` is not a finite number > 0, ``priors`` is not an (n, K) array of distributions,
        ``labels`` is not a 1-d array of integers in [0, K), their lengths differ, or ``rng`` is not an
        accepted source.
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
    """RR-with-prior's draws for one block: -1 where the true label is kept, else the rank of the
    released label among the top k without the true label (uniform).

    The draws go in runs of :data:`_CHUNK_ROWS` rows (the uniforms of a run, then the ranks of its
    changed labels), so a seeded generator gives the same releases whatever the block size."""
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
    """Exact release probabilities of :func:`rr_with_prior`.

    With a uniform prior this is exactly K-ary randomized response.

    Parameters
    ----------
    priors : array_like
        (n, K) array; each row a probability distribution over the K classes.
    epsilon : float
        Privacy parameter, > 0.

    Returns
    -------
    numpy.ndarray
        P of shape (n, K, K) with P[i, y, z] = Pr[example i with true label y is released as z].

    Raises
    ------
    labeldp.errors.ConfigError
        If ``epsilon`` is not a finite number > 0 or ``priors`` is not an (n, K) array of
        probability distributions.
    """
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
    """Exact (K, K) release probabilities of :func:`randomized_response`: P[y, z] = Pr[y -> z].

    Parameters
    ----------
    num_classes : int
        K, the number of classes (>= 2).
    epsilon : float
        Privacy parameter, > 0.

    Returns
    -------
    numpy.ndarray
        float64 array of shape (K, K); row y is the distribution of the release of true label y.

    Raises
    ------
    labeldp.errors.ConfigError
        If ``epsilon`` is not a finite number > 0 or ``num_classes`` is not an integer >= 2.
    """
    eps = check_epsilon(epsilon)
    num_classes = check_num_classes(num_classes)
    keep = keep_probability(eps, num_classes)
    probs = np.full((num_classes, num_classes), change_probability(eps, num_classes) / (num_classes - 1))
    np.fill_diagonal(probs, keep)
    return probs


def randomized_response_likelihood(noisy_labels, num_classes: int, epsilon: float) -> np.ndarray:
    """L[i, y] = Pr[RR releases noisy_labels[i] | true label y], shape (n, K).

    Depends only on released values and public parameters, so using it costs no privacy. It is the
    per-example noise channel that forward-corrected training needs.

    Parameters
    ----------
    noisy_labels : array_like of int
        1-d integer array of released labels in [0, num_classes), shape (n,).
    num_classes : int
        K, the number of classes (>= 2).
    epsilon : float
        The privacy parameter the labels were released with, > 0.

    Returns
    -------
    numpy.ndarray
        float64 array of shape (n, K).

    Raises
    ------
    labeldp.errors.ConfigError
        If ``epsilon`` is not a finite number > 0, ``num_classes`` is not an integer >= 2, or
        ``noisy_labels`` is not a 1-d array of integers in [0, num_classes).
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

    Equal to ``rr_with_prior_probabilities(priors, epsilon)[i, :, noisy_labels[i]]`` without building
    the (n, K, K) array. Uses only released values and the (public) priors: free of privacy cost.

    Parameters
    ----------
    noisy_labels : array_like of int
        1-d integer array of labels released by :func:`rr_with_prior`, shape (n,).
    priors : array_like
        The (n, K) priors the labels were released with.
    epsilon : float
        The privacy parameter the labels were released with, > 0.

    Returns
    -------
    numpy.ndarray
        float64 array of shape (n, K).

    Raises
    ------
    labeldp.errors.ConfigError
        If ``epsilon`` is not a finite number > 0, ``priors`` is not an (n, K) array of distributions,
        ``noisy_labels`` is not a 1-d array of integers in [0, K) of length n, or a released label lies
        outside its prior's top k (not an RR-with-prior release).
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
