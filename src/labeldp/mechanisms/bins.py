"""RR-on-bins for regression labels (Ghazi et al., "Regression with Label Differential Privacy", ICLR 2023).

Labels take values on a public, strictly increasing grid of G points (ratings 1..5, or a clipped
range discretised by a fixed public rule; mapping a raw label to its grid index is a fixed function
of that label alone, so it costs nothing extra). True labels are passed as grid *indices*.

The mechanism: a monotone map Phi cuts the grid into d contiguous bins, bin j carrying the value
yhat_j. An example whose label lies in bin Phi(y) is released as yhat_{Phi(y)} with probability
e^eps / (e^eps + d - 1), otherwise as one of the other d - 1 bin values, uniformly. With d = 1 the
output is a constant. Given a prior over the grid, :func:`optimal_bins` picks the Phi, the values and
the d that minimise the expected squared error E[(release - y)^2] (the paper's optimal mechanism for
the squared loss).

Privacy guarantee (label DP, neighbours differ in one example's label, ``REPLACE_ONE``): each
example's release is epsilon-DP with respect to its true label, *provided its prior row and the grid
do not depend on its own label* (a prior from public inputs, from other examples' released labels,
or released privately beforehand, with that release accounted separately). Examples are randomised
independently: an array of releases costs epsilon per example, composed in parallel.

Accounting: for one example, two labels in the same bin give identical output distributions and two
labels in different bins give exactly RR over that example's d bin values. So every example's pair
of output distributions is dominated by RR over its own d buckets, and since RR's privacy profile at
fixed epsilon decreases in the number of buckets, the event to record for a release is dp_accounting's
``RandomizedResponseDpEvent`` over the smallest d >= 2 among the examples (noise parameter
d / (e^eps + d - 1)); examples with d = 1 release a constant and cost nothing (``NoOpDpEvent`` if all
have d = 1). :func:`rr_on_bins` returns each example's d for this purpose.

Exactness of the randomness: the decision to *not* release the true bin is ``U < q`` with
``U = gen.random(n)`` (multiples of 2^-53 in [0, 1)) and q = (d-1) e^-eps / (1 + (d-1) e^-eps)
computed without cancellation. The realised drop probability is q rounded *up* to a multiple of
2^-53, never below q, so the realised epsilon never exceeds the nominal one, even where
e^eps / (e^eps + d - 1) rounds to 1.0 in float64 (epsilon >~ 37). Where e^-eps underflows to 0
(epsilon > ~745) q is floored at the smallest positive float, so a label still changes with
probability 2^-53 (realised epsilon below 37 + ln(d - 1)). A dropped example then gets a uniform bin
among the other d - 1 from ``gen.integers``. The exact probability functions report the nominal
mechanism.

Cost of :func:`optimal_bins`: one dynamic programme over contiguous partitions serves every d at
once. It takes about G^3 / 6 vectorised additions and minimum comparisons per prior (loops over
grid positions and bin counts only, vectorised over priors) and G^2 table entries per prior, solved
in chunks of at most 2^21 entries (16 MiB); G = 50 and 10^4 priors take well under a second on one
core. Give :func:`rr_on_bins` distinct priors and a ``prior_index`` when many examples share one.

All functions are vectorised over examples; there is no per-example Python loop. Numpy only.
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
    """The optimal RR-on-bins maps of m priors over a grid of G points (arrays are read-only).

    Usually built by :func:`optimal_bins`; :func:`rr_on_bins` and the probability functions accept one
    in place of the priors it was computed from.

    Parameters
    ----------
    bin_of, values, d, expected_loss, grid : numpy.ndarray
        The attributes of the same names. The arrays are made read-only in place (not copied).
    epsilon : float
        The privacy parameter the maps were computed for.

    Attributes
    ----------
    bin_of : numpy.ndarray
        (m, G) int64, the bin of every grid point: non-decreasing along the grid, from 0 to
        ``d[i] - 1``, every bin non-empty.
    values : numpy.ndarray
        (m, G) float64, the released value of each bin; entries from ``d[i]`` on are NaN.
    d : numpy.ndarray
        (m,) int64, the number of bins.
    expected_loss : numpy.ndarray
        (m,) float64, E[(release - y)^2] with y drawn from the prior (the optimum).
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
    """q = (d-1) e^-eps / (1 + (d-1) e^-eps), the probability that RR over d bins does not release
    the true bin, computed without cancellation; 0 where d = 1. For d >= 2 it is floored at the
    smallest positive normal float, so that it stays > 0 where e^-eps underflows."""
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
    """Return ``grid`` as a 1-d float64 array of at least 2 finite, strictly increasing values."""
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
    """Return ``priors`` as an (m, G) array of distributions over the grid (a 1-d prior gives m = 1)."""
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
    """For each example, the row of the priors it uses."""
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
    """(G + 1, r) prefix sums of a (G, r) block, row by row (each column summed in grid order)."""
    out = np.zeros((columns.shape[0] + 1, columns.shape[1]))
    for k in range(columns.shape[0]):
        np.add(out[k], columns[k], out=out[k + 1])
    return out


def _interval_cost(end, start, totals, t: float, s: float):
    """Optimal value and cost of the bins [a, b), with the in-bin weight e^eps scaled to 1 (others t).

    ``end`` and ``start`` are (W, S1, S2) prefix sums at b and at a (mass, first and second moments
    about the prior mean), ``totals`` the whole-grid sums. Returns (B / A, C - B^2 / A) where
    A = t W + s W_I, B = t S1 + s S1_I, C = t S2 + s S2_I, s = 1 - t; the cost is the bin's share of
    the expected loss times (1 + (d - 1) t) W. A = 0 only where t underflows and the bin is empty.
    """
    a = t * totals[0] + s * (end[0] - start[0])
    b = t * totals[1] + s * (end[1] - start[1])
    c = t * totals[2] + s * (end[2] - start[2])
    safe = np.where(a > 0, a, 1.0)
    value = np.where(a > 0, b / safe, 0.0)
    return value, np.maximum(c - b * value, 0.0)


def _solve_chunk(prior: np.ndarray, grid: np.ndarray, epsilon: float):
    """The dynamic programme on an (r, G) block of priors; see :func:`optimal_bins`."""
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

    For a partition of the grid into intervals I_1..I_d, the expected loss is
    sum_j sum_y P(y) w_j(y) (yhat_j - y)^2 / (e^eps + d - 1), w_j(y) = e^eps if y in I_j else 1, so
    each bin's optimal value is its weighted mean and its cost does not depend on d. One dynamic
    programme over contiguous partitions gives the best partition for every d; the d minimising the
    loss is kept.

    Ties (losses within 1e-9 of the prior's variance) are broken by a fixed rule, so the maps are a
    pure function of (prior row, grid, epsilon) and do not depend on the other rows: the smallest d;
    then, for that d, the last bin starts at the smallest grid index that still allows an optimal
    partition, then the bin before it, and so on (the later bins are as wide as possible).

    Parameters
    ----------
    priors : array_like
        (m, G) array, each row a distribution over the G grid points (zeros allowed), or a
        single (G,) prior (m = 1). Reads no labels: free of privacy cost.
    grid : array_like
        (G,) strictly increasing finite label values, G >= 2.
    epsilon : float
        Privacy parameter, > 0.

    Returns
    -------
    BinMaps
        The maps of the m priors. Cost: about m G^3 / 6 vectorised operations (see the module
        docstring).

    Raises
    ------
    labeldp.errors.ConfigError
        If ``epsilon`` is not a finite number > 0, ``grid`` is not a 1-d array of at least 2 finite,
        strictly increasing values, or ``priors`` is not an (m, G) array of distributions over the grid.
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
    """The maps of ``priors`` (solved unless they are already a checked :class:`BinMaps`)."""
    checked = _check_priors_or_maps(priors, grid, epsilon)
    return checked if isinstance(checked, BinMaps) else optimal_bins(checked, grid, epsilon)


def rr_on_bins(
    labels, grid, priors, epsilon: float, rng: RandomSource = None, prior_index=None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Release each label by RR-on-bins with the optimal map for its prior (epsilon-label-DP each).

    Each release is epsilon-DP with respect to the example's true label provided its prior row and the
    grid do not depend on that label (see the module docstring).

    Everything is checked before any randomness is drawn. Draws ``gen.random(n)``, then
    ``gen.integers`` for the examples whose true bin was dropped.

    Parameters
    ----------
    labels : array_like of int
        1-d integer array of true labels as grid indices in [0, G), length n.
    grid : array_like
        (G,) strictly increasing finite label values.
    priors : array_like or BinMaps
        The public priors over the grid: (G,) shared by every example; (m, G) with
        ``prior_index``; or (n, G), one row per example, without it. A :class:`BinMaps` from
        :func:`optimal_bins` (same grid and epsilon) may stand for its priors, to reuse the solve.
        A row must not depend on the label of an example that uses it.
    epsilon : float
        Privacy parameter, > 0.
    rng : None, int, str, numpy.random.Generator or labeldp.randomness.SecureGenerator, optional
        Seed, ``numpy.random.Generator``, ``"secure"`` or None (see :mod:`labeldp.randomness`).
    prior_index : array_like of int, optional
        (n,) integers in [0, m): the prior row of each example. Examples
        sharing a row share one solve of the dynamic programme.

    Returns
    -------
    values : numpy.ndarray
        (n,) float64, the released values.
    bins : numpy.ndarray
        (n,) int64, the released bin indices (what :func:`rr_on_bins_likelihood` takes).
    d : numpy.ndarray
        (n,) int64, each example's number of bins. The accounting event is RR over
        ``d[d >= 2].min()`` buckets (see the module docstring).

    Raises
    ------
    labeldp.errors.ConfigError
        If ``epsilon``, ``grid``, ``priors`` (or a :class:`BinMaps` computed for another grid or
        epsilon), ``labels``, ``prior_index`` or ``rng`` is invalid, or the number of prior rows does
        not match the number of examples.
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
    """Exact release probabilities of RR-on-bins under each prior row.

    P[i, y, b] = Pr[a label at grid index y is released as bin b] under prior row i (or a
    :class:`BinMaps`). Bins b >= d[i] have probability 0.

    Parameters
    ----------
    priors : array_like or BinMaps
        (m, G) priors over the grid, a single (G,) prior, or a :class:`BinMaps` computed for the same
        grid and epsilon.
    grid : array_like
        (G,) strictly increasing finite label values.
    epsilon : float
        Privacy parameter, > 0.

    Returns
    -------
    numpy.ndarray
        float64 array P of shape (m, G, G).

    Raises
    ------
    labeldp.errors.ConfigError
        If ``epsilon``, ``grid`` or ``priors`` is invalid, or a :class:`BinMaps` was computed for
        another grid or epsilon.
    """
    eps = check_epsilon(epsilon)
    points = _check_grid(grid)
    maps = _resolve_maps(priors, points, eps)
    keep, other = _keep_and_other(eps, maps.d.astype(np.float64))
    bins = np.arange(points.size)
    in_range = bins[None, None, :] < maps.d[:, None, None]
    same = maps.bin_of[:, :, None] == bins[None, None, :]
    return np.where(same, keep[:, None, None], np.where(in_range, other[:, None, None], 0.0))


def rr_on_bins_likelihood(released_bins, grid, priors, epsilon: float, prior_index=None) -> np.ndarray:
    """L[i, y] = Pr[example i is released as bin released_bins[i] | its true label is grid point y].

    Takes the same ``grid``, ``priors``, ``epsilon`` and ``prior_index`` as :func:`rr_on_bins` and
    its released bins; equal to ``rr_on_bins_probabilities(...)[row_i, :, released_bins[i]]``
    without building the (m, G, G) array. Shape (n, G). Uses only released values and public priors,
    so it costs no privacy: the per-example noise channel a trainer needs.

    Parameters
    ----------
    released_bins : array_like of int
        (n,) bin indices released by :func:`rr_on_bins`.
    grid : array_like
        (G,) strictly increasing finite label values.
    priors : array_like or BinMaps
        The priors (or maps) the release used, as for :func:`rr_on_bins`.
    epsilon : float
        The privacy parameter of the release, > 0.
    prior_index : array_like of int, optional
        (n,) integers in [0, m): the prior row of each example, as for :func:`rr_on_bins`.

    Returns
    -------
    numpy.ndarray
        float64 array L of shape (n, G).

    Raises
    ------
    labeldp.errors.ConfigError
        If an argument is invalid as for :func:`rr_on_bins`, or a released bin is not below its map's
        number of bins (not an RR-on-bins release under these priors).
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
