"""Noisy label counts over hashed features: each bucket of each slot of a
:class:`labeldp.data.hashing.HashSpec`, the sparse generalisation of :mod:`labeldp.mechanisms.label_marginals`.

Privacy guarantee (label DP, replace one label), buckets from public columns: every row lies in one
bucket of each of its F slots, so one replaced label moves the table by at most F in L1 with two
classes (only positive counts are released: a bucket's size is public) and 2F with more; c times
that for a privacy unit of up to c rows. Discrete Laplace noise with a = epsilon / (that bound) on
every cell makes the whole table epsilon-DP. Counts accumulate block by block
(:class:`CountAccumulator`); the noise is drawn once, at the end.
"""

from __future__ import annotations

import numpy as np

from labeldp._validation import check_contribution, check_epsilon, check_num_classes
from labeldp.errors import ConfigError
from labeldp.mechanisms.discrete_laplace import discrete_laplace
from labeldp.mechanisms.label_marginals import moved_cells
from labeldp.randomness import RandomSource


def hashed_sensitivity(num_slots: int, num_classes: int, contribution: int = 1) -> int:
    """The table's L1 sensitivity: F (two classes) or 2F (more), times ``contribution``."""
    return moved_cells(num_slots, num_classes) * check_contribution(contribution)


class CountAccumulator:
    """The exact label counts of every bucket, added block by block (not private: see
    :func:`noisy_hashed_counts`).

    Attributes
    ----------
    counts : numpy.ndarray
        (num_buckets, K) int64, the counts so far.
    rows : int
        The rows added so far.
    """

    def __init__(self, num_buckets: int, num_slots: int, num_classes: int):
        if int(num_buckets) < 1 or int(num_slots) < 1:
            raise ConfigError(f"num_buckets and num_slots must be at least 1, got {num_buckets} and {num_slots}")
        self.num_buckets, self.num_slots = int(num_buckets), int(num_slots)
        self.num_classes = check_num_classes(num_classes)
        self.counts = np.zeros((self.num_buckets, self.num_classes), dtype=np.int64)
        self.rows = 0

    def add(self, labels: np.ndarray, buckets: np.ndarray) -> None:
        """Count one block: (rows,) checked class positions and (rows, num_slots) buckets."""
        codes = np.asarray(buckets)
        if codes.ndim != 2 or codes.shape != (labels.size, self.num_slots) or codes.dtype.kind not in "iu":
            raise ConfigError(
                f"buckets must be an integer ({labels.size}, {self.num_slots}) array, got {codes.dtype} {codes.shape}"
            )
        outside = ConfigError(f"every bucket must lie in [0, {self.num_buckets})")
        try:  # a bucket out of range: negative (bincount refuses it) or past the end (a longer count)
            if self.num_classes > 2:
                cells = np.bincount((codes * self.num_classes + labels[:, None]).ravel(), minlength=self.counts.size)
                if cells.size > self.counts.size:
                    raise outside
                self.counts += cells.reshape(self.counts.shape)
            else:  # two classes: every row's buckets, and the positive rows' again
                sizes = np.bincount(codes.ravel(), minlength=self.num_buckets)
                if sizes.size > self.num_buckets:
                    raise outside
                positives = np.bincount(codes[labels == 1].ravel(), minlength=self.num_buckets)
                self.counts[:, 0] += sizes - positives
                self.counts[:, 1] += positives
        except ValueError:
            raise outside from None
        self.rows += labels.size


def noisy_hashed_counts(
    counts: np.ndarray,
    num_slots: int,
    epsilon: float,
    rng: RandomSource = None,
    contribution: int = 1,
) -> np.ndarray:
    """The exact counts plus discrete Laplace noise calibrated to :func:`hashed_sensitivity`:
    epsilon-label-DP for the whole table (see the module docstring).

    With two classes column 1 is noised and column 0 is the bucket's size minus it; counts may be
    negative or exceed the bucket's size.
    """
    eps = check_epsilon(epsilon)
    num_classes = counts.shape[1]
    parameter = eps / hashed_sensitivity(num_slots, num_classes, contribution)
    if num_classes == 2:
        positives = counts[:, 1] + discrete_laplace(parameter, counts.shape[0], rng)
        return np.stack([counts.sum(axis=1) - positives, positives], axis=1)
    return counts + discrete_laplace(parameter, counts.shape, rng)


__all__ = ["CountAccumulator", "hashed_sensitivity", "noisy_hashed_counts"]
