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


def _network_sort(priors_t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(buffer, at): the columns of a (K, m) block sorted descending by a sorting network of elementwise
    max/min (faster than ``np.sort`` along a short axis; same values), the r-th largest entries of the
    columns being ``buffer[at[r]]``. Never writes the block."""
    source = np.asarray(priors_t, order="C")  # a transposing copy when priors_t is a view of (m, K) rows
    num_classes, m = source.shape
    buffer = np.empty((num_classes + 1, m))
    at = [-1] * num_classes  # wire i is buffer[at[i]], or source[i] (never written) while at[i] < 0
    fresh = iter(range(num_classes + 1))  # each wire takes one row of its own at its first write, the spare one
    spare = next(fresh)

    def wire(i: int) -> np.ndarray:
        return buffer[at[i]] if at[i] >= 0 else source[i]

    for high, low in _sorting_network(num_classes):
        np.maximum(wire(high), wire(low), out=buffer[spare])
        if at[low] < 0:
            at[low] = next(fresh)
            np.minimum(wire(high), source[low], out=buffer[at[low]])
        else:
            np.minimum(wire(high), buffer[at[low]], out=buffer[at[low]])
        at[high], spare = spare, at[high] if at[high] >= 0 else next(fresh)
    for i in range(num_classes):  # a wire no comparator touches (K = 1)
        if at[i] < 0:
            at[i] = next(fresh)
            buffer[at[i]] = source[i]
    return buffer, np.array(at)


def _descending_rows(priors_t: np.ndarray) -> list[np.ndarray]:
    """The columns of a (K, m) block sorted descending, as K rows (see :func:`_network_sort`)."""
    buffer, at = _network_sort(priors_t)
    return [buffer[i] for i in at]


def _descending_columns(block: np.ndarray, transposed: np.ndarray | None) -> tuple[Callable, Callable]:
    """(column, kth) for the (m, K) block: column(r), the r-th largest entry of each row as a contiguous
    (m,) array; kth(k), each row's k-th largest entry for an (m,) array of k. ``transposed``: the block as
    a contiguous (K, m) array, or None where K is above :data:`_NETWORK_CLASSES`."""
    m, num_classes = block.shape
    if transposed is not None:
        buffer, at = _network_sort(transposed)
        return (lambda r: buffer[at[r]]), (lambda k: buffer.reshape(-1)[at[k - 1] * m + np.arange(m)])
    ascending = np.sort(block, axis=1)
    copied: dict[int, np.ndarray] = {}

    def column(r: int) -> np.ndarray:
        first = r - r % _COLUMNS
        if first not in copied:
            copied.clear()
            last = min(first + _COLUMNS, num_classes)
            copied[first] = np.ascontiguousarray(ascending[:, num_classes - last : num_classes - first][:, ::-1].T)
        return copied[first][r - first]

    return column, lambda k: ascending.reshape(-1)[np.arange(0, m * num_classes, num_classes) + (num_classes - k)]


def _choose_k(column, weights: np.ndarray, m: int) -> np.ndarray:
    """Algorithm 2's k for m rows, in the smallest unsigned integer type that holds K."""
    num_classes = weights.size
    # Stopping once no objective rose and every o_k * margin < best is exact: in real arithmetic
    # f(k) = w_k S_k (w_k = 1 / (1 + (k - 1) c)) rises from k to k + 1 iff d_k (k + 1/c - 1) > S_k, and
    # that difference never increases with k, so once f(k) < f(j) for some j < k, f falls from k on.
    # Each o_k is f(k) within a relative (K + 4) 2^-53; the margin is four times that, both ways. (Where
    # c underflows to 0 the objectives never fall and the scan runs to K.)
    margin = 1.0 + (num_classes + 8) * 2.0**-50
    mass = column(0).copy()
    best = mass * weights[0]
    small = np.min_scalar_type(num_classes)  # k in the smallest integer type while it is updated
    k, step = np.ones(m, dtype=small), np.empty(m, dtype=small)
    objective, better = np.empty(m), np.empty(m, dtype=bool)
    for row in range(1, num_classes):
        mass += column(row)
        np.multiply(mass, weights[row], out=objective)
        np.greater(objective, best, out=better)
        if better.any():
            np.maximum(best, objective, out=best)
            np.multiply(better, small.type(row + 1), out=step)  # k is increasing: the last rise wins
            np.maximum(k, step, out=k)
        elif (np.multiply(objective, margin, out=objective) < best).all():
            break
    return k


def top_k(block: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The k of each row of an (m, K) block of priors and its top-k sets as a (K, m) mask:
    ``member[j, i]`` says whether label j is in row i's top k (C order up to :data:`_NETWORK_CLASSES`
    classes, else the transpose of an (m, K) comparison in the block's own layout: of a C-order array for
    C-ordered priors, C order itself for Fortran-ordered ones).

    Among entries equal to a row's threshold, lower labels are members first (a fixed, public order).
    """
    m, num_classes = block.shape
    # up to _NETWORK_CLASSES the columns as contiguous rows, sorted by the network and compared with the
    # thresholds; above, compared in the block's own layout (faster at large K than a transposed one)
    transposed = np.array(block.T, order="C") if num_classes <= _NETWORK_CLASSES else None
    column, kth = _descending_columns(block, transposed)
    k = _choose_k(column, weights, m)
    threshold = kth(k)  # each row's k-th largest entry
    k = k.astype(np.int64)
    member = transposed >= threshold if transposed is not None else (block >= threshold[:, None]).T
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
