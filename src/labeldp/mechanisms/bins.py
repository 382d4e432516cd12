"""RR-on-bins for regression labels (Ghazi et al., "Regression with Label Differential Privacy", ICLR 2023).

Labels are *indices* into a public, strictly increasing grid of G values. A monotone map Phi cuts the
grid into d contiguous bins, bin j released as the value yhat_j: an example is released as
yhat_{Phi(y)} with probability e^eps / (e^eps + d - 1), else as one of the other d - 1 bin values,
uniformly. :func:`optimal_bins` picks, per prior row, the Phi, values and d that minimise the expected
squared error.

Privacy guarantee (label DP, ``REPLACE_ONE``): each release is epsilon-DP with respect to its true
label, *provided its prior row and the grid do not depend on its own label*; examples are randomised
independently (epsilon per example, composed in parallel).

Accounting: two labels in one bin give the same output distribution, two in different bins exactly RR
over the example's d bin values; RR's privacy profile at fixed epsilon falls as buckets are added, so
a release is recorded as ``RandomizedResponseDpEvent`` over the smallest d >= 2 among its examples
(``NoOpDpEvent`` if every d = 1: a constant release). :func:`rr_on_bins` returns each example's d.

The true bin is dropped when ``gen.random(n) < q``, q = (d-1) e^-eps / (1 + (d-1) e^-eps): q rounded
*up* to the 2^-53 grid, so the realised epsilon never exceeds the nominal one (as in
:func:`labeldp.mechanisms.rr.randomized_response`). The probability functions report the nominal
mechanism.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from labeldp._validation import check_epsilon, check_labels, check_priors
from labeldp.errors import ConfigError
from labeldp.randomness import RandomSource, as_generator

#: Losses within this fraction of the prior's second moment about its mean count as ties.
_TIE_RTOL = 1e-9
#: Dynamic-programme table entries ((G + 1)^2 per prior) handled at a time: bounds memory at 16 MiB.
_CHUNK_ENTRIES = 1 << 21


@dataclass(frozen=True, eq=False)
class BinMaps:
    """The optimal RR-on-bins maps of m priors over a grid of G points (arrays made read-only in place).

    Built by :func:`optimal_bins`; :func:`rr_on_bins` and the probability functions accept one in place
    of its priors, to reuse the solve.

    Attributes
    ----------
    bin_of : numpy.ndarray
        (m, G) int64, each grid point's bin: non-decreasing from 0 to ``d[i] - 1``, no bin empty.
    values : numpy.ndarray
        (m, G) float64, each bin's released value; NaN from ``d[i]`` on.
    d : numpy.ndarray
        (m,) int64, the number of bins.
    expected_loss : numpy.ndarray
        (m,) float64, the optimal E[(release - y)^2] under the prior.
    grid : numpy.ndarray
        (G,) float64, the grid the maps were computed for.
    epsilon : float
        The privacy parameter the maps were computed for.
    """

    bin_of: np.ndarray
    values: np.ndarray
    d: np.ndarray
    expected_loss: np.ndarray
    grid: np.ndarray
    epsilon: float

    def __post_init__(self) -> None:
        for name in ("bin_of", "values", "d", "expected_loss", "grid"):
            getattr(self, name).setflags(write=False)


def _drop_probability(epsilon: float, d) -> np.ndarray:
    """q = (d-1) e^-eps / (1 + (d-1) e^-eps) without cancellation, 0 where d = 1; floored at the smallest
    positive float for d >= 2 so it stays > 0 where e^-eps underflows.
    """
    d = np.asarray(d, dtype=np.float64)
    others = (d - 1.0) * math.exp(-epsilon)
    q = others / (1.0 + others)
    return np.where(d > 1, np.maximum(q, np.finfo(np.float64).tiny), 0.0)


def _keep_and_other(epsilon: float, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Nominal probabilities of releasing the true bin, and each other bin, for RR over d bins."""
    t = math.exp(-epsilon)
    denominator = 1.0 + (d - 1.0) * t
    return 1.0 / denominator, np.where(d > 1, t / denominator, 0.0)


def _check_grid(grid) -> np.ndarray:
    """``grid`` as a 1-d float64 array of at least 2 finite, strictly increasing values."""
    array = np.asarray(grid, dtype=np.float64)
    if array.ndim != 1:
        raise ConfigError(f"grid must be a 1-d array, got shape {array.shape}")
    if array.size < 2:
        raise ConfigError(f"grid must have at least 2 points, got {array.size}")
    if not np.all(np.isfinite(array)):
        raise ConfigError("grid contains NaN or infinite values")
    bad = np.flatnonzero(np.diff(array) <= 0)
    if bad.size:
        i = int(bad[0])
        raise ConfigError(
            f"grid must be strictly increasing, grid[{i + 1}] = {array[i + 1]:g} follows grid[{i}] = {array[i]:g}"
        )
    return array


def _check_bin_priors(priors, num_points: int) -> np.ndarray:
    """``priors`` as an (m, G) array of distributions over the grid (a 1-d prior gives m = 1)."""
    array = np.asarray(priors, dtype=np.float64)
    if array.ndim == 1:
        array = array[None, :]
    if array.ndim == 2 and array.shape[1] != num_points:
        raise ConfigError(f"priors must have one entry per grid point ({num_points}), got {array.shape[1]}")
    return check_priors(array)


def _check_maps(maps: BinMaps, grid: np.ndarray, epsilon: float) -> BinMaps:
    if maps.epsilon != epsilon:
        raise ConfigError(f"priors is a BinMaps computed for epsilon={maps.epsilon:g}, not {epsilon:g}")
    if not np.array_equal(maps.grid, grid):
        raise ConfigError("priors is a BinMaps computed for a different grid")
    if (
        maps.bin_of.ndim != 2
        or maps.bin_of.shape[1] != grid.size
        or np.any(maps.bin_of < 0)
        or np.any(maps.bin_of >= maps.d[:, None])
    ):
        raise ConfigError("priors is a malformed BinMaps: bin_of must be (m, G) with entries in [0, d)")
    return maps


def _example_rows(num_examples: int, num_priors: int, prior_index) -> np.ndarray:
    """Each example's prior row."""
    if prior_index is None:
        if num_priors == 1:
            return np.zeros(num_examples, dtype=np.int64)
        if num_priors != num_examples:
            raise ConfigError(
                f"length mismatch: {num_examples} examples but {num_priors} prior rows "
                "(pass prior_index to share rows, or one row per example)"
            )
        return np.arange(num_examples)
    rows = check_labels(prior_index, num_priors, "prior_index")
    if rows.size != num_examples:
        raise ConfigError(f"length mismatch: {num_examples} examples but prior_index has {rows.size}")
    return rows


def _prefix(columns: np.ndarray) -> np.ndarray:
    """(G + 1, r) prefix sums of a (G, r) block, each column summed in grid order."""
    out = np.zeros((columns.shape[0] + 1, columns.shape[1]))
    for k in range(columns.shape[0]):
        np.add(out[k], columns[k], out=out[k + 1])
    return out


def _interval_cost(end, start, totals, t: float, s: float):
    """Optimal value and cost of the bins [a, b), in-bin weight e^eps scaled to 1 (others t, s = 1 - t).

    ``end``, ``start``: (W, S1, S2) prefix sums at b and a (mass, first and second moments about the
    prior mean); ``totals``: the whole grid's. Returns (B / A, C - B^2 / A) with A = t W + s W_I (B, C
    alike); the cost is the bin's share of the expected loss times (1 + (d - 1) t) W.
    """
    a = t * totals[0] + s * (end[0] - start[0])
    b = t * totals[1] + s * (end[1] - start[1])
    c = t * totals[2] + s * (end[2] - start[2])
    safe = np.where(a > 0, a, 1.0)
    value = np.where(a > 0, b / safe, 0.0)
    return value, np.maximum(c - b * value, 0.0)


def _solve_chunk(prior: np.ndarray, grid: np.ndarray, epsilon: float):
    """The dynamic programme of :func:`optimal_bins` on an (r, G) block of priors."""
    num_points = grid.size
    rows = prior.shape[0]
    t, s = math.exp(-epsilon), -math.expm1(-epsilon)
    p = np.ascontiguousarray(prior.T)  # (G, r): every operation below is a vector over the priors
    weight = _prefix(p)
    first_raw = np.zeros(rows)
    for k in range(num_points):
        first_raw += p[k] * grid[k]
    mean = first_raw / weight[-1]
    moment = p * (grid[:, None] - mean)  # moments about each prior's mean keep C - B^2/A accurate far from 0
    first = _prefix(moment)
    moment *= grid[:, None] - mean
    second = _prefix(moment)
    prefixes = (weight, first, second)
    totals = (weight[-1], first[-1], second[-1])
    tolerance = _TIE_RTOL * second[-1]

    # best[j, b]: least total cost of cutting grid points [0, b) into j bins (inf where impossible).
    best = np.full((num_points + 1, num_points + 1, rows), np.inf)
    best[0, 0] = 0.0
    scratch = np.empty((num_points, rows))
    for b in range(1, num_points + 1):
        _, cost = _interval_cost(tuple(x[b] for x in prefixes), tuple(x[:b] for x in prefixes), totals, t, s)
        best[1, b] = cost[0]
        for j in range(2, b + 1):
            candidates = np.add(best[j - 1, j - 1 : b], cost[j - 1 : b], out=scratch[: b - j + 1])
            np.min(candidates, axis=0, out=best[j, b])

    bins = np.arange(1, num_points + 1)
    loss = best[1:, num_points] / (1.0 + (bins - 1.0) * t)[:, None]  # (G, r): expected loss x W, per d
    d = np.argmax(loss <= loss.min(axis=0) + tolerance, axis=0) + 1  # the smallest d within tolerance
    expected_loss = loss[d - 1, np.arange(rows)] / totals[0]

    # Walk back from b = G: bin j starts at the smallest a whose best completion is within tolerance.
    starts = np.zeros((rows, num_points), dtype=bool)
    values = np.full((rows, num_points), np.nan)
    j, end = d.copy(), np.full(rows, num_points)
    cut = np.arange(num_points)[:, None]
    for _ in range(int(d.max())):
        act = np.flatnonzero(j >= 1)
        ja, ba = j[act], end[act]
        value, cost = _interval_cost(
            tuple(x[ba, act] for x in prefixes),
            tuple(x[:num_points, act] for x in prefixes),
            tuple(x[act] for x in totals),
            t,
            s,
        )
        total = best[ja - 1, :num_points, act].T + cost  # (G, active): cut a, then the best before it
        feasible = (cut >= ja - 1) & (cut < ba)
        within = feasible & (total <= best[ja, ba, act] + tolerance[act])
        fallback = np.where(feasible, total, np.inf).argmin(axis=0)  # never needed: within holds the argmin
        a = np.where(within.any(axis=0), within.argmax(axis=0), fallback)
        values[act, ja - 1] = mean[act] + value[a, np.arange(act.size)]
        starts[act, a] = True
        j[act], end[act] = ja - 1, a
    bin_of = np.cumsum(starts, axis=1, dtype=np.int64) - 1
    return bin_of, values, d.astype(np.int64), expected_loss


def optimal_bins(priors, grid, epsilon: float) -> BinMaps:
    """The RR-on-bins maps that minimise the expected squared error under each prior row.

    The loss is sum_j sum_y P(y) w_j(y) (yhat_j - y)^2 / (e^eps + d - 1), w_j(y) = e^eps inside I_j and
    1 outside, so a bin's optimal value is its weighted mean and its cost does not depend on d: one
    dynamic programme over contiguous partitions (about G^3 / 6 vectorised operations per prior) gives
    the best partition for every d.

    Ties (losses within 1e-9 of the prior's variance) go to the smallest d, then to the latest bins as
    wide as possible, so a row's maps depend on (prior row, grid, epsilon) alone. ``priors`` is (m, G) or
    one (G,) row and reads no labels: free of privacy cost.
    """
    eps = check_epsilon(epsilon)
    points = _check_grid(grid)
    prior = _check_bin_priors(priors, points.size)
    m, num_points = prior.shape
    bin_of = np.empty((m, num_points), dtype=np.int64)
    values = np.empty((m, num_points))
    d = np.empty(m, dtype=np.int64)
    loss = np.empty(m)
    step = max(1, _CHUNK_ENTRIES // (num_points + 1) ** 2)
    for start in range(0, m, step):
        stop = min(start + step, m)
        bin_of[start:stop], values[start:stop], d[start:stop], loss[start:stop] = _solve_chunk(
            prior[start:stop], points, eps
        )
    return BinMaps(bin_of=bin_of, values=values, d=d, expected_loss=loss, grid=points.copy(), epsilon=eps)


def _check_priors_or_maps(priors, grid: np.ndarray, epsilon: float) -> BinMaps | np.ndarray:
    """A :class:`BinMaps` checked against (grid, epsilon), or the priors checked as an (m, G) array."""
    if isinstance(priors, BinMaps):
        return _check_maps(priors, grid, epsilon)
    return _check_bin_priors(priors, grid.size)


def _resolve_maps(priors, grid: np.ndarray, epsilon: float) -> BinMaps:
    """The maps of ``priors``, solved unless they already are a :class:`BinMaps`."""
    checked = _check_priors_or_maps(priors, grid, epsilon)
    return checked if isinstance(checked, BinMaps) else optimal_bins(checked, grid, epsilon)


def rr_on_bins(
    labels, grid, priors, epsilon: float, rng: RandomSource = None, prior_index=None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Release each label (a grid index) by RR-on-bins with its prior's optimal map: epsilon-label-DP each.

    Parameters
    ----------
    priors : array_like or BinMaps
        Public priors over the grid: one (G,) row for all; (m, G) with ``prior_index`` ((n,) rows in
        [0, m), one solve per distinct row); or (n, G) without. A row must not depend on the label of an
        example that uses it.

    Returns
    -------
    values, bins, d : numpy.ndarray
        (n,) released values, released bin indices (for :func:`rr_on_bins_likelihood`) and each
        example's number of bins (the event is RR over ``d[d >= 2].min()`` buckets).
    """
    eps = check_epsilon(epsilon)
    points = _check_grid(grid)
    checked = _check_priors_or_maps(priors, points, eps)
    true = check_labels(labels, points.size)
    rows = _example_rows(true.size, len(checked.d) if isinstance(checked, BinMaps) else len(checked), prior_index)
    gen = as_generator(rng)
    maps = _resolve_maps(checked, points, eps)
    d = maps.d[rows]
    true_bin = maps.bin_of[rows, true]
    drop = gen.random(true.size) < _drop_probability(eps, d)
    released = true_bin.copy()
    dropped = np.flatnonzero(drop)
    if dropped.size:
        other = gen.integers(0, d[dropped] - 1)  # d >= 2 wherever q > 0
        released[dropped] = other + (other >= true_bin[dropped])
    return maps.values[rows, released], released, d


def rr_on_bins_probabilities(priors, grid, epsilon: float) -> np.ndarray:
    """Exact (m, G, G) release probabilities: P[i, y, b] = Pr[grid index y -> bin b] under prior row i."""
    eps = check_epsilon(epsilon)
    points = _check_grid(grid)
    maps = _resolve_maps(priors, points, eps)
    keep, other = _keep_and_other(eps, maps.d.astype(np.float64))
    bins = np.arange(points.size)
    in_range = bins[None, None, :] < maps.d[:, None, None]
    same = maps.bin_of[:, :, None] == bins[None, None, :]
    return np.where(same, keep[:, None, None], np.where(in_range, other[:, None, None], 0.0))


def rr_on_bins_likelihood(released_bins, grid, priors, epsilon: float, prior_index=None) -> np.ndarray:
    """L[i, y] = Pr[example i is released as bin released_bins[i] | true grid index y], shape (n, G).

    Takes :func:`rr_on_bins`'s arguments and released bins; free of privacy cost. A bin beyond its map's
    d (not an RR-on-bins release under these priors) raises ConfigError.
    """
    eps = check_epsilon(epsilon)
    points = _check_grid(grid)
    checked = _check_priors_or_maps(priors, points, eps)
    released = check_labels(released_bins, points.size, "released_bins")
    rows = _example_rows(released.size, len(checked.d) if isinstance(checked, BinMaps) else len(checked), prior_index)
    maps = _resolve_maps(checked, points, eps)
    d = maps.d[rows]
    if np.any(released >= d):
        i = int(np.flatnonzero(released >= d)[0])
        raise ConfigError(
            f"released_bins[{i}] = {released[i]} but its map has only {d[i]} bins: "
            "not an RR-on-bins release under these priors"
        )
    keep, other = _keep_and_other(eps, d.astype(np.float64))
    same = maps.bin_of[rows] == released[:, None]
    return np.where(same, keep[:, None], other[:, None])
