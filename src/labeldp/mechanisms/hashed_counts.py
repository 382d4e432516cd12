"""Noisy label counts over hashed features: for every bucket of every hashed slot, its rows' label counts.

The generalisation of the noisy label marginals (:mod:`labeldp.mechanisms.marginals`) to sparse,
high-cardinality features: the bins are the buckets of the slots of a
:class:`labeldp.data.hashing.HashSpec` (categoricals and their crosses, hashed from public columns).

Privacy guarantee (label DP, replace one label): every row lies in exactly one bucket of each of its
F slots, so replacing one row's label moves, for each slot, the counts of one bucket (two slots whose
buckets coincide move that bucket twice). With two classes only the positive count of each bucket is
released (a bucket's size is public: its negatives are the size minus it): the table moves by at most
F in L1. With K >= 3 classes every cell is released and the table moves by at most 2F. Under a
privacy unit of up to c rows, whose labels change together, it moves by c times that. Discrete
Laplace noise with parameter a = epsilon / (that L1 bound) on every cell (Pr[X = x] proportional to
e^(-a |x|)) then makes the whole table epsilon-DP: the probability of any output changes by at most
e^(a |shift|_1) <= e^epsilon. The counts are accumulated block by block (:class:`CountAccumulator`), so
the release reads a table of any size in one pass; the noise is drawn once, at the end.
"""

from __future__ import annotations

import numpy as np

from labeldp._validation import check_contribution, check_epsilon, check_num_classes
from labeldp.errors import ConfigError
from labeldp.mechanisms.discrete_laplace import discrete_laplace
from labeldp.mechanisms.marginals import moved_cells
from labeldp.randomness import RandomSource


def hashed_sensitivity(num_slots: int, num_classes: int, contribution: int = 1) -> int:
    """The L1 sensitivity of the released table: F (two classes) or 2F (more), times ``contribution``.

    Parameters
    ----------
    num_slots : int
        F, the number of hashed slots (buckets per row).
    num_classes : int
        K, the number of classes.
    contribution : int, optional
        c, the most rows of one privacy unit (default 1).

    Returns
    -------
    int
        The most the released cells move in L1 between neighbouring datasets.
    """
    return moved_cells(num_slots, num_classes) * check_contribution(contribution)


class CountAccumulator:
    """The exact label counts of every bucket, added block by block (not private: see :func:`noisy_hashed_counts`).

    Parameters
    ----------
    num_buckets : int
        The size of the index space.
    num_slots : int
        F, the buckets of every row.
    num_classes : int
        K.

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
        """Count one block.

        Parameters
        ----------
        labels : numpy.ndarray
            (rows,) class positions in [0, K), checked by the caller.
        buckets : numpy.ndarray
            (rows, num_slots) bucket indices.

        Raises
        ------
        labeldp.errors.ConfigError
            If ``buckets`` is not (rows, num_slots) integers in [0, num_buckets).
        """
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
    """The exact counts with discrete Laplace noise calibrated to their L1 sensitivity: epsilon-label-DP.

    See the module docstring for the guarantee: it holds when the buckets come from public columns and
    each row was counted once, in one bucket per slot.

    Parameters
    ----------
    counts : numpy.ndarray
        (num_buckets, K) the exact counts (:class:`CountAccumulator`).
    num_slots : int
        F, the buckets of every row.
    epsilon : float
        The privacy parameter of the whole table, > 0.
    rng : None, int, str, numpy.random.Generator or labeldp.randomness.SecureGenerator, optional
        The noise's source (see :mod:`labeldp.randomness`).
    contribution : int, optional
        c, the most rows of one privacy unit among the rows counted (default 1).

    Returns
    -------
    numpy.ndarray
        (num_buckets, K) int64. With two classes column 1 is noised and column 0 is the bucket's size
        minus it; with more, every cell is noised. Counts may be negative or exceed the bucket's size.

    Raises
    ------
    labeldp.errors.ConfigError
        If ``epsilon`` is not a finite number > 0 or ``rng`` is not an accepted source.
    """
    eps = check_epsilon(epsilon)
    num_classes = counts.shape[1]
    parameter = eps / hashed_sensitivity(num_slots, num_classes, contribution)
    if num_classes == 2:
        positives = counts[:, 1] + discrete_laplace(parameter, counts.shape[0], rng)
        return np.stack([counts.sum(axis=1) - positives, positives], axis=1)
    return counts + discrete_laplace(parameter, counts.shape, rng)


__all__ = ["CountAccumulator", "hashed_sensitivity", "noisy_hashed_counts"]
