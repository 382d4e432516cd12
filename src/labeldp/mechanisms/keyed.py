"""Randomized response drawn as a pure function of a secret key and each row's identity, so that a row
released again (a retried or speculative task, a lost executor, a frame computed twice) is released the
same, bit for bit: recomputation is never a second draw.

Each row's two 64-bit words are AES-128 of its 128-bit identity under the key (:func:`row_words`): for
distinct identities, a pseudorandom function of them, unpredictable without the key. The first word decides
whether the label changes, as a uniform on the 2^-53 grid below the change probability (as
:func:`~labeldp.mechanisms.rr.randomized_response` does); the second which other label, as a uniform on that
grid times the number of candidates (each within 2^-53 of uniform). The distribution of each release is exactly RR's or
RR-with-prior's, up to those roundings (``tests/mechanisms/test_keyed.py``).
"""

from __future__ import annotations

import functools

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from labeldp._validation import check_epsilon, check_labels, check_num_classes, check_priors, check_same_length
from labeldp.mechanisms._top_k import blocks_top_k
from labeldp.mechanisms.rr import PriorBlock, change_probability, chunk_rows, keep_probability


def row_words(key: bytes, identity: np.ndarray) -> np.ndarray:
    """(n, 2) uint64 words of each row: AES-128 under ``key`` (16 bytes) of its (n, 2) uint64 ``identity``."""
    identity = np.ascontiguousarray(identity, dtype="<u8")
    if identity.ndim != 2 or identity.shape[1] != 2:
        raise ValueError(f"identities are (n, 2) 64-bit words, got shape {identity.shape}")
    encryptor = Cipher(algorithms.AES(bytes(key)), modes.ECB()).encryptor()
    out = np.empty(identity.size + 2, dtype="<u8")  # room for one block more, as update_into asks; not zeroed
    written = encryptor.update_into(identity.view(np.uint8).data, out.view(np.uint8).data)
    return out[: written // 8].reshape(-1, 2)


def _changed(words: np.ndarray, probability) -> np.ndarray:
    """Whether each row's first word, as a uniform on the 2^-53 grid of [0, 1), lies below ``probability``
    (compared as integers: the grid point below p times 2^53, rounded up, shifted back to 64 bits)."""
    limit = np.ceil(np.asarray(probability, dtype=np.float64) * 2.0**53).astype(np.uint64) << np.uint64(11)
    return words[:, 0] < limit


def _below(words: np.ndarray, counts) -> np.ndarray:
    """floor(u c) for each second word as a uniform u on the 2^-53 grid of [0, 1), and ``counts`` c: uniform in
    [0, c), each value's probability within 2^-53 of 1 / c."""
    uniform = np.right_shift(words[:, 1], np.uint64(11)).astype(np.float64)
    uniform *= np.asarray(counts, dtype=np.float64) * 2.0**-53
    return uniform.astype(np.int64)


def keyed_randomized_response(labels, num_classes: int, epsilon: float, words: np.ndarray) -> np.ndarray:
    """K-ary randomized response of each label from its row's ``words``: epsilon-label-DP per row, as
    :func:`~labeldp.mechanisms.randomized_response` (a different draw of the same distribution)."""
    eps = check_epsilon(epsilon)
    num_classes = check_num_classes(num_classes)
    true = check_labels(labels, num_classes)
    check_same_length(labels=true, words=words)
    if num_classes == 2:  # the other label
        released = 1 - true
    else:  # one of the K - 1 others, uniformly
        released = _below(words, num_classes - 1)
        released += true
        released += 1
        released -= (released >= num_classes) * np.int64(num_classes)  # branch-free: past K, from 0 again
    released -= true  # branch-free choice: the true label plus, where it changes, the step to the other
    released *= _changed(words, change_probability(eps, num_classes)).view(np.int8)
    released += true
    return released


def keyed_rr_with_prior(labels, priors, epsilon: float, words: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """RR-with-prior of each label from its row's ``words``; the releases and each k, as
    :func:`~labeldp.mechanisms.rr_with_prior` (epsilon-label-DP while a row's prior does not depend on its label)."""
    eps = check_epsilon(epsilon)
    prior = check_priors(priors)
    true = check_labels(labels, prior.shape[1])
    n = check_same_length(labels=true, priors=prior, words=words)
    noisy, ks = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
    change = change_probability(eps, np.arange(prior.shape[1] + 1))
    weights = keep_probability(eps, np.arange(1, prior.shape[1] + 1))
    prepare = functools.partial(PriorBlock, true, change, ks)
    for start, stop, block in blocks_top_k(prior, weights, chunk_rows(prior.shape[1]), then=prepare):
        mine = words[start:stop]
        rank = np.full(stop - start, prior.shape[1], dtype=np.min_scalar_type(prior.shape[1]))  # K: kept
        redraw = np.flatnonzero(_changed(mine, block.probability) | block.outside)
        rank[redraw] = _below(mine[redraw], block.candidates[redraw])
        block.place(rank, noisy[start:stop])
    return noisy, ks


__all__ = ["keyed_randomized_response", "keyed_rr_with_prior", "row_words"]
