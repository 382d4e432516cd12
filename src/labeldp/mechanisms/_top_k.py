"""RR-with-prior's label-independent part: each prior row's k and top-k set (Algorithm 2 of Ghazi et
al. 2021), block by block.

Nothing here reads a label or draws a random number, so blocks may be computed on worker threads in
any order while the caller draws the noise on its own thread in a fixed order (with the caller's own
work per block that draws nothing, such as RR-with-prior's reading of the block's labels). k is chosen exactly as
:func:`labeldp.mechanisms.rr.prior_top_k` documents: the first k whose float64 objective
o_k = fl(m_k * w_k) (m_k the descending sum of the k largest entries, w_k the keep probability) is
strictly above every earlier one; the scan stops early for a block (:func:`_choose_k`) with the same
k, bit for bit.
"""

from __future__ import annotations

import functools
import os
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

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
    """Batcher's odd-even merge sort comparators (i, j), i < j, on the first ``num_classes`` wires."""
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
    """The columns of a (K, m) block sorted descending, as K contiguous rows, by a sorting network of
    elementwise max/min (faster than ``np.sort`` along a short axis; same values). Never writes the block.
    """
    rows = list(np.asarray(priors_t, order="C"))  # a transposing copy when priors_t is a view of (m, K) rows
    own = [False] * len(rows)  # rows[i] is an array of ours (else a row of priors_t, never written)
    spare = np.empty_like(rows[0])
    for high, low in _sorting_network(len(rows)):
        np.maximum(rows[high], rows[low], out=spare)
        if own[low]:
            np.minimum(rows[high], rows[low], out=rows[low])
        else:
            rows[low], own[low] = np.minimum(rows[high], rows[low]), True
        rows[high], spare = spare, rows[high] if own[high] else np.empty_like(spare)
        own[high] = True
    return rows


def _descending_columns(block: np.ndarray, transposed: np.ndarray | None):
    """r -> the r-th largest entry of each row of the (m, K) block, as a contiguous (m,) array
    (``transposed``: the block as a contiguous (K, m) array, or None where K is above
    :data:`_NETWORK_CLASSES`)."""
    num_classes = block.shape[1]
    if transposed is not None:
        return _descending_rows(transposed).__getitem__
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
    """Algorithm 2's k for m rows and each row's threshold (its k-th largest entry)."""
    num_classes = weights.size
    # Stopping once no objective rose and every o_k * margin < best is exact: in real arithmetic
    # f(k) = w_k S_k (w_k = 1 / (1 + (k - 1) c)) rises from k to k + 1 iff d_k (k + 1/c - 1) > S_k, and
    # that difference never increases with k, so once f(k) < f(j) for some j < k, f falls from k on.
    # Each o_k is f(k) within a relative (K + 4) 2^-53; the margin is four times that, both ways. (Where
    # c underflows to 0 the objectives never fall and the scan runs to K.)
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


def top_k(block: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The k of each row of an (m, K) block of priors and its top-k sets as a (K, m) mask:
    ``member[j, i]`` says whether label j is in row i's top k (C order up to :data:`_NETWORK_CLASSES`
    classes, else the transpose of an (m, K) array in C order).

    Among entries equal to a row's threshold, lower labels are members first (a fixed, public order).
    """
    m, num_classes = block.shape
    if num_classes <= _NETWORK_CLASSES:  # the columns as contiguous rows: sorted, and compared with the thresholds
        transposed = np.array(block.T, order="C")
        k, threshold = _choose_k(_descending_columns(block, transposed), weights, m)
        member = transposed >= threshold
    else:  # compared in the block's own layout, which is faster at large K than a transposed one
        k, threshold = _choose_k(_descending_columns(block, None), weights, m)
        member = (block >= threshold[:, None]).T
    if np.count_nonzero(member) != k.sum():  # a row has entries equal to its threshold beyond its k-th largest
        tied = np.flatnonzero(np.count_nonzero(member, axis=0) != k)
        rows, limit = block[tied], threshold[tied, None]
        greater, equal = rows > limit, rows == limit
        room = k[tied, None] - greater.sum(axis=1, keepdims=True)
        member[:, tied] = (greater | (equal & (np.cumsum(equal, axis=1) <= room))).T
    return k, member


def worker_threads(entries: int) -> int:
    """Threads for the top-k sets of ``entries`` prior entries: the free cores by labeldp's thread policy
    (:mod:`labeldp.runtime`, recounted at most every ``RECHECK_INTERVAL`` seconds), capped by
    ``OMP_NUM_THREADS``; 1 below :data:`_PARALLEL_ENTRIES`.
    """
    if entries < _PARALLEL_ENTRIES:
        return 1
    if not _COUNTED or time.monotonic() - _COUNTED[1] >= runtime.RECHECK_INTERVAL:
        _COUNTED[:] = [runtime.free_cores(runtime.RECHECK_SAMPLE_SECONDS), time.monotonic()]
    limit = os.environ.get("OMP_NUM_THREADS", "")
    threads = int(_COUNTED[0])
    return max(1, min(threads, int(limit)) if limit.isdigit() and int(limit) > 0 else threads)


def blocks_top_k(
    prior: np.ndarray, weights: np.ndarray, rows: int, then: Callable[[int, int, tuple], Any] | None = None
) -> Iterator[tuple[int, int, Any]]:
    """(start, stop, :func:`top_k` of ``prior[start:stop]``) for blocks of ``rows`` rows, in order; with
    ``then``, (start, stop, ``then(start, stop, top_k)``) instead.

    With several threads blocks (and ``then``, which must draw nothing) are computed ahead on a pool
    (numpy releases the GIL), at most two per thread ahead of the caller.
    """

    def block(start: int, stop: int) -> Any:
        result = top_k(prior[start:stop], weights)
        return result if then is None else then(start, stop, result)

    bounds = [(start, min(start + rows, len(prior))) for start in range(0, len(prior), rows)]
    threads = min(worker_threads(prior.size), len(bounds))
    if threads <= 1:
        for start, stop in bounds:
            yield start, stop, block(start, stop)
        return
    with ThreadPoolExecutor(threads, thread_name_prefix="labeldp-top-k") as pool:
        pending: deque = deque()
        for start, stop in bounds:
            pending.append((start, stop, pool.submit(block, start, stop)))
            if len(pending) > 2 * threads:
                first, last, result = pending.popleft()
                yield first, last, result.result()
        for first, last, result in pending:
            yield first, last, result.result()
