"""Numeric labels on a public grid: the declared range, its grid, and snapping values onto it.

A regression's label domain is public as a classification's classes are: a range [low, high] and a
grid of G values in it, declared by the dataset (MovieLens ratings 1..5) or by the user
(``--label-range 0 499 --label-grid 50``), never computed from the private labels. Each private value
is clipped to the range and snapped to the nearest grid point, a fixed function of that value alone,
so it costs no privacy; the mechanisms then work on grid indices. The raw *test* values stay beside
them, so that the test error is the error on the actual values (a prediction is never better than
the grid allows).
"""

from __future__ import annotations

import numpy as np

from labeldp.errors import ConfigError, DataError

#: grid points of a declared label range when --label-grid is not given
DEFAULT_GRID_SIZE = 50


def label_grid(low: float, high: float, size: int = DEFAULT_GRID_SIZE) -> np.ndarray:
    """``size`` evenly spaced values from ``low`` to ``high`` (both included).

    Parameters
    ----------
    low, high : float
        The declared (public) label range, finite, ``low < high``.
    size : int, optional
        The number of grid points, at least 2 (default :data:`DEFAULT_GRID_SIZE`).

    Returns
    -------
    numpy.ndarray
        (size,) float64 grid values.

    Raises
    ------
    labeldp.errors.ConfigError
        If the range is not two finite numbers ``low < high``, or ``size`` is not an integer >= 2.
    """
    low, high = float(low), float(high)
    if not (np.isfinite(low) and np.isfinite(high)) or not low < high:
        raise ConfigError(f"a label range must be two finite numbers LOW < HIGH, got [{low:g}, {high:g}]")
    if isinstance(size, bool) or int(size) != size or size < 2:
        raise ConfigError(f"a label grid needs at least 2 points, got {size!r}")
    return np.linspace(low, high, int(size))


def snap_to_grid(values, grid: np.ndarray, where: str = "labels") -> np.ndarray:
    """The index of the grid point nearest to each value after clipping it to [grid[0], grid[-1]]
    (ties to the lower point). A missing or infinite value is an error (raised before any release,
    and without saying which or how many: the values are private).

    Parameters
    ----------
    values : array-like
        The (private) numeric labels, a non-empty 1-d array.
    grid : numpy.ndarray
        The public grid, strictly increasing.
    where : str, optional
        What the values are, for the error message (default ``"labels"``).

    Returns
    -------
    numpy.ndarray
        (n,) int64 grid indices, one per value.

    Raises
    ------
    labeldp.errors.DataError
        If ``values`` is not a non-empty 1-d array, or holds a missing or infinite value.
    """
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1 or array.size == 0:
        raise DataError(f"the {where} must be a non-empty 1-d array of numbers")
    if not np.all(np.isfinite(array)):
        raise DataError(f"the {where} contain missing or infinite values")
    grid = np.asarray(grid, dtype=np.float64)
    midpoints = (grid[1:] + grid[:-1]) / 2
    return np.searchsorted(midpoints, np.clip(array, grid[0], grid[-1]), side="left").astype(np.int64)


__all__ = ["DEFAULT_GRID_SIZE", "label_grid", "snap_to_grid"]
