"""RR-with-prior's label-independent part: each prior row's k and top-k label set (Algorithm 2 of Ghazi
et al. 2021), block by block, on the cores no other process keeps busy.

Nothing here reads a label or draws a random number: a block's k and top-k set are functions of its
prior rows alone, so blocks may be computed on worker threads in any order while the caller draws the
noise on its own thread, block after block, in the order it always has (the releases of a seeded
generator do not depend on the threads).

The choice of k, as :func:`labeldp.mechanisms.rr.prior_top_k` documents it: with the row's
entries in descending order d_0 >= d_1 >= ..., its objective for k is o_k = fl(m_k * w_k), where m_k is
the float64 sum d_0 + ... + d_{k-1} added in that order and w_k the float64 keep probability
e^eps / (e^eps + k - 1); k is the first k whose o_k is strictly above every earlier one (numpy's argmax).
The scan over k stops early, for a whole block, once no later k can beat any row's best (see
:func:`_choose_k`): the same k as the full scan, bit for bit, with a fraction of the work.
"""

from __future__ import annotations

import functools
import os
import time
from collections import deque
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from labeldp import runtime

#: the largest K sorted by a sorting network (beyond it, np.sort along each row)
_NETWORK_CLASSES = 32
#: columns of a row-sorted block copied to contiguous arrays at a time (K > _NETWORK_CLASSES)
_COLUMNS = 16
#: prior entries below which no worker thread is started (their time would be a few milliseconds)
_PARALLEL_ENTRIES = 1 << 23
#: the worker threads last counted and when: [threads, time.monotonic()]
_COUNTED: list[float] = []


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
    """The columns of a (K, m) block sorted in descending order, as K contiguous row arrays (row 0 the
    largest), by a sorting network of elementwise maxima and minima over whole rows (K = 10: 32
    comparators), several times faster than ``np.sort`` along a short axis; the sorted values are the
    same either way. The block is copied first (any memory layout), never written."""
    rows = list(np.array(priors_t, order="C"))  # one transposing copy when priors_t is a view of (m, K) rows
    spare = np.empty_like(rows[0])
    for high, low in _sorting_network(len(rows)):
        np.maximum(rows[high], rows[low], out=spare)
        np.minimum(rows[high], rows[low], out=rows[low])
        rows[high], spare = spare, rows[high]
    return rows


def _descending_columns(block: np.ndarray):
    """A function r -> the r-th largest entry of each row of the (m, K) block, as a contiguous (m,)
    array (r from 0). Rows are sorted once; for large K, columns are copied out ``_COLUMNS`` at a time
    as the scan asks for them (most blocks need the first few)."""
    num_classes = block.shape[1]
    if num_classes <= _NETWORK_CLASSES:
        return _descending_rows(block.T).__getitem__
    ascending = np.sort(block, axis=1)
    copied: dict[int, np.ndarray] = {}

    def column(r: int) -> np.ndarray:
        first = r - r % _COLUMNS
        if first not in copied:
            copied.clear()
            last = min(first + _COLUMNS, num_classes)
            copied[first] = np.ascontiguousarray(ascending[:, num_classes - last : num_classes - first][:, ::-1].T)
        return copied[first][r - first]

    return column


def _choose_k(column, weights: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
    """Algorithm 2's k for m rows (the first maximiser of o_k, see the module docstring) and each row's
    threshold, its k-th largest entry; ``column(r)`` gives the rows' r-th largest entries, ``weights``
    the keep probabilities of k = 1..K (rr.keep_probability: w_k = 1 / (1 + (k - 1) c), c > 0).

    The scan stops after a step at which no row's objective rose and every row's objective lies below
    its best by more than rounding (o_k * margin < best). That is exact: in real arithmetic
    f(k) = w_k * S_k (S_k the exact sum of the k largest entries) rises from k to k + 1 iff
    d_k (k + 1/c - 1) > S_k, and d_k (k + 1/c - 1) - S_k never increases with k (its step is
    (d_{k+1} - d_k)(k + 1/c) <= 0); so once f(k) < f(j) for some j < k, f falls strictly from k on.
    Each o_k is f(k) within a relative (K + 4) 2^-53 (K float additions, three roundings in w_k, one
    in the product), so o_k * margin < best, margin = 1 + (K + 8) 2^-50 (four times that, both ways),
    implies f(k) < f(j) for the j of the best, and then every later o is below best: no later step
    could have changed k or the threshold. (Where c underflows to 0 the objectives never fall and
    the scan runs to K.)
    """
    num_classes = weights.size
    margin = 1.0 + (num_classes + 8) * 2.0**-50
    first = column(0)
    mass = first.copy()
    best = mass * weights[0]
    small = np.min_scalar_type(num_classes)  # k in the smallest integer type while it is updated
    k, step = np.ones(m, dtype=small), np.empty(m, dtype=small)
    threshold = first
    objective, better = np.empty(m), np.empty(m, dtype=bool)
    for row in range(1, num_classes):
        entry = column(row)
        mass += entry
        np.multiply(mass, weights[row], out=objective)
        np.greater(objective, best, out=better)
        if better.any():
            np.maximum(best, objective, out=best)
            np.multiply(better, small.type(row + 1), out=step)  # k is increasing: the last rise wins
            np.maximum(k, step, out=k)
            threshold = np.where(better, entry, threshold)
        elif (np.multiply(objective, margin, out=objective) < best).all():
            break
    return k.astype(np.int64), threshold


def top_k(block: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The k and top-k set of each row of an (m, K) block of priors.

    Among entries equal to a row's threshold, lower labels are members first (a fixed, public order).

    Returns (k, int64 (m,); member, bool (m, K) in C order; flat, ``np.flatnonzero(member)``: each
    row's k members in label order, the rows one after another).
    """
    m, num_classes = block.shape
    k, threshold = _choose_k(_descending_columns(block), weights, m)
    member = block >= threshold[:, None]
    flat = np.flatnonzero(member)
    if flat.size != k.sum():  # a row has entries equal to its threshold beyond its k-th largest
        tied = np.flatnonzero(np.bincount(flat // num_classes, minlength=m) != k)
        rows, limit = block[tied], threshold[tied, None]
        greater, equal = rows > limit, rows == limit
        room = k[tied, None] - greater.sum(axis=1, keepdims=True)
        member[tied] = greater | (equal & (np.cumsum(equal, axis=1) <= room))
        flat = np.flatnonzero(member)
    return k, member, flat


def worker_threads(entries: int) -> int:
    """Threads for the top-k sets of ``entries`` prior entries, by labeldp's thread policy
    (:mod:`labeldp.runtime`, rule 1): the free cores (:func:`labeldp.runtime.free_cores`, counted over
    ``RECHECK_SAMPLE_SECONDS`` at most once every ``RECHECK_INTERVAL`` seconds), at most
    ``OMP_NUM_THREADS`` where the environment sets it; 1 below :data:`_PARALLEL_ENTRIES` entries."""
    if entries < _PARALLEL_ENTRIES:
        return 1
    if not _COUNTED or time.monotonic() - _COUNTED[1] >= runtime.RECHECK_INTERVAL:
        _COUNTED[:] = [runtime.free_cores(runtime.RECHECK_SAMPLE_SECONDS), time.monotonic()]
    limit = os.environ.get("OMP_NUM_THREADS", "")
    threads = int(_COUNTED[0])
    return max(1, min(threads, int(limit)) if limit.isdigit() and int(limit) > 0 else threads)


def blocks_top_k(prior: np.ndarray, weights: np.ndarray, rows: int) -> Iterator[tuple[int, int, tuple]]:
    """(start, stop, :func:`top_k` of ``prior[start:stop]``) for blocks of ``rows`` rows, in order.

    With more than one worker thread (:func:`worker_threads`), blocks are computed ahead on a pool
    (numpy releases the GIL in its loops), at most two per thread ahead of the caller."""
    bounds = [(start, min(start + rows, len(prior))) for start in range(0, len(prior), rows)]
    threads = min(worker_threads(prior.size), len(bounds))
    if threads <= 1:
        for start, stop in bounds:
            yield start, stop, top_k(prior[start:stop], weights)
        return
    with ThreadPoolExecutor(threads, thread_name_prefix="labeldp-top-k") as pool:
        pending: deque = deque()
        for start, stop in bounds:
            pending.append((start, stop, pool.submit(top_k, prior[start:stop], weights)))
            if len(pending) > 2 * threads:
                first, last, result = pending.popleft()
                yield first, last, result.result()
        for first, last, result in pending:
            yield first, last, result.result()
