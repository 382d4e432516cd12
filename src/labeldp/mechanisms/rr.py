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

import functools

import numpy as np

from labeldp._validation import (
    check_epsilon,
    check_labels,
    check_num_classes,
    check_priors,
    check_same_length,
)
from labeldp.errors import ConfigError
from labeldp.randomness import RandomSource, as_generator

# Rows processed at a time by RR-with-prior: at least _CHUNK_ROWS, about _CHUNK_ENTRIES prior
# entries (a 4 MiB block: memory stays bounded at any K, and per-block overheads stay small at K = 10).
_CHUNK_ROWS = 1 << 13
_CHUNK_ENTRIES = 1 << 19
#: the largest K sorted by a sorting network (beyond it, np.sort along the class axis)
_NETWORK_CLASSES = 32
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


def _cumsum_down(block: np.ndarray, dtype=None) -> np.ndarray:
    """Cumulative sum over axis 0 of a (K, m) block, one vectorised add per row.

    For short K and long m this is many times faster than ``np.cumsum(block, axis=0)``.
    """
    out = np.empty(block.shape, dtype=dtype or block.dtype)
    out[0] = block[0]
    for row in range(1, block.shape[0]):
        np.add(out[row - 1], block[row], out=out[row])
    return out


@functools.cache
def _sorting_network(num_classes: int) -> tuple[tuple[int, int], ...]:
    """Batcher's odd-even merge sort on ``num_classes`` inputs: comparators (i, j), i < j, applied in
    order. Built for the next power of two and restricted to the first ``num_classes`` wires (the
    others hold -inf for a descending sort, so their comparators never exchange)."""
    size = 1 << max(num_classes - 1, 0).bit_length()
    pairs = []
    merge = 1
    while merge < size:
        step = merge
        while step >= 1:
            for j in range(step % merge, size - step, 2 * step):
                for i in range(min(step, size - j - step)):
                    if (i + j) // (2 * merge) == (i + j + step) // (2 * merge) and i + j + step < num_classes:
                        pairs.append((i + j, i + j + step))
            step //= 2
        merge *= 2
    return tuple(pairs)


def _descending_rows(priors_t: np.ndarray) -> list[np.ndarray]:
    """The columns of a (K, m) block sorted in descending order, as K row arrays (row 0 the largest).

    For K up to :data:`_NETWORK_CLASSES` a sorting network of elementwise maxima and minima over
    whole rows (K = 10: 32 comparators), several times faster than ``np.sort`` along a short axis;
    the sorted values are the same either way."""
    num_classes = priors_t.shape[0]
    if num_classes > _NETWORK_CLASSES:
        return list(np.sort(priors_t, axis=0)[::-1])
    rows = [np.array(row) for row in priors_t]  # copies, contiguous whatever the block's layout
    spare = np.empty_like(rows[0])
    for high, low in _sorting_network(num_classes):
        np.maximum(rows[high], rows[low], out=spare)
        np.minimum(rows[high], rows[low], out=rows[low])
        rows[high], spare = spare, rows[high]
    return rows


def _top_k_columns(priors_t: np.ndarray, epsilon: float) -> tuple[np.ndarray, np.ndarray]:
    """Algorithm 2's choice of k and the top-k label set, on a (K, m) block of priors (one column per
    example; any memory layout).

    k maximises keep_probability(eps, k) * (mass of the k largest prior entries); ties go to the
    smallest k. Among equal prior entries, lower label indices rank first (a fixed, public order).

    Returns (k of shape (m,), member mask of shape (K, m)).
    """
    num_classes, m = priors_t.shape
    descending = _descending_rows(priors_t)
    weights = keep_probability(epsilon, np.arange(1, num_classes + 1))
    # The first k whose objective is strictly the largest so far: the smallest maximiser (argmax's rule).
    mass = descending[0].copy()
    best = mass * weights[0]
    k = np.ones(m, dtype=np.min_scalar_type(num_classes))  # small while it is updated in place
    threshold = descending[0]  # the k-th largest entry
    objective = np.empty(m)
    better = np.empty(m, dtype=bool)
    for row in range(1, num_classes):
        mass += descending[row]
        np.multiply(mass, weights[row], out=objective)
        np.greater(objective, best, out=better)
        np.maximum(best, objective, out=best)
        np.copyto(k, row + 1, where=better)
        np.copyto(threshold, descending[row], where=better)
    k = k.astype(np.int64)
    member = np.greater_equal(priors_t, threshold, order="C")  # C order: rr_with_prior flattens it
    tied = np.flatnonzero(member.sum(axis=0) != k)  # entries equal to the threshold beyond the k-th
    if tied.size:
        block, limit = priors_t[:, tied], threshold[tied]
        greater, equal = block > limit, block == limit
        room = k[tied] - greater.sum(axis=0)
        member[:, tied] = greater | (equal & (_cumsum_down(equal, np.int32) <= room))
    return k, member


def _chunk_rows(num_classes: int) -> int:
    """Rows per block of RR-with-prior: about :data:`_CHUNK_ENTRIES` prior entries, a multiple of
    :data:`_CHUNK_ROWS` rows."""
    return _CHUNK_ROWS * max(1, _CHUNK_ENTRIES // (num_classes * _CHUNK_ROWS))


def prior_top_k(priors, epsilon: float) -> tuple[np.ndarray, np.ndarray]:
    """The k and the top-k label set that RR-with-prior uses for each row of ``priors``.

    Reads no labels, so it is free of privacy cost.

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
    n = prior.shape[0]
    k = np.empty(n, dtype=np.int64)
    members = np.empty(prior.shape, dtype=bool)
    chunk = _chunk_rows(prior.shape[1])
    for start in range(0, n, chunk):
        stop = min(start + chunk, n)
        k[start:stop], member_t = _top_k_columns(prior[start:stop].T, eps)
        members[start:stop] = member_t.T
    return k, members


def rr_with_prior(labels, priors, epsilon: float, rng: RandomSource = None) -> tuple[np.ndarray, np.ndarray]:
    """RR-with-prior (Algorithm 2 of Ghazi et al. 2021): RR restricted to the prior's top k labels.

    For each example, k is chosen to maximise e^eps/(e^eps+k-1) times the prior mass of the k most
    likely labels (smallest k on ties). If the true label is among those k it is kept with
    probability e^eps/(e^eps+k-1), else one of the other k-1 is released uniformly; if it is not
    among them, a uniform label from the k is released. Each release is epsilon-label-DP as long as
    the prior row does not depend on that example's own label.

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
    block = _chunk_rows(num_classes)
    for start in range(0, n, block):
        stop = min(start + block, n)
        m = stop - start
        y = true[start:stop]
        k, member = _top_k_columns(prior[start:stop].T, eps)
        true_cell = y * m + np.arange(m)  # (y[i], i) in the flattened (K, m) member mask
        flat_member = member.reshape(-1)
        true_in_top_k = flat_member[true_cell]
        rank = _released_ranks(gen, true_in_top_k, k, change)
        # The candidates of a changed label are the top k without the true label; the released one
        # is the candidate of the drawn rank: its class is the number of classes before it.
        flat_member[true_cell] = False
        small = np.min_scalar_type(-num_classes)  # ranks, counts and classes all lie in [-1, K]
        rank = rank.astype(small)
        seen = np.zeros(m, dtype=small)
        position = np.zeros(m, dtype=small)
        for label in range(num_classes):
            seen += member[label]
            position += seen <= rank
        noisy[start:stop] = np.where(rank < 0, y, position)
        ks[start:stop] = k
    return noisy, ks


def _released_ranks(gen, true_in_top_k: np.ndarray, k: np.ndarray, change: np.ndarray) -> np.ndarray:
    """RR-with-prior's draws for one block: -1 where the true label is kept, else the rank of the
    released label among the top k without the true label (uniform).

    The draws go in runs of :data:`_CHUNK_ROWS` rows (the uniforms of a run, then the ranks of its
    changed labels), so a seeded generator gives the same releases whatever the block size."""
    rank = np.full(k.size, -1, dtype=np.int64)
    for start in range(0, k.size, _CHUNK_ROWS):
        stop = min(start + _CHUNK_ROWS, k.size)
        in_top = true_in_top_k[start:stop]
        keep = in_top & ~_changed(gen, change[k[start:stop]])
        redraw = np.flatnonzero(~keep)
        if redraw.size:
            rank[start + redraw] = gen.integers(0, k[start:stop][redraw] - in_top[redraw])
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
