"""Numeric labels on a public grid: the declared range, its grid, and snapping values onto it.

A regression's range and grid of G values are declared (MovieLens ratings 1..5, ``--label-range 0 499
--label-grid 50``), never computed from the private labels. Snapping a private value to the nearest
grid point is a fixed function of that value alone, so it costs no privacy; the mechanisms work on grid
indices. The raw *test* values stay beside them, so the test error is on the actual values.
"""

from __future__ import annotations

import numpy as np

from labeldp.errors import ConfigError, DataError

#: grid points of a declared label range when --label-grid is not given
DEFAULT_GRID_SIZE = 50


def label_grid(low: float, high: float, size: int = DEFAULT_GRID_SIZE) -> np.ndarray:
    """``size`` evenly spaced values from ``low`` to ``high``, both included."""
    low, high = float(low), float(high)
    if not (np.isfinite(low) and np.isfinite(high)) or not low < high:
        raise ConfigError(f"a label range must be two finite numbers LOW < HIGH, got [{low:g}, {high:g}]")
    if isinstance(size, bool) or int(size) != size or size < 2:
        raise ConfigError(f"a label grid needs at least 2 points, got {size!r}")
    return np.linspace(low, high, int(size))


def snap_to_grid(values, grid: np.ndarray, where: str = "labels") -> np.ndarray:
    """The index of the grid point nearest each value clipped to the grid's range (ties to the lower); a missing
    or infinite value is refused before any release, neither named nor counted.
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
