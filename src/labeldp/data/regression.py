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

from pathlib import Path

import numpy as np

from labeldp.data.dataset import LabeledDataset
from labeldp.errors import ConfigError, DataError

#: grid points of a declared label range when --label-grid is not given
DEFAULT_GRID_SIZE = 50


def label_grid(low: float, high: float, size: int = DEFAULT_GRID_SIZE) -> np.ndarray:
    """``size`` evenly spaced values from ``low`` to ``high`` (both included)."""
    low, high = float(low), float(high)
    if not (np.isfinite(low) and np.isfinite(high)) or not low < high:
        raise ConfigError(f"a label range must be two finite numbers LOW < HIGH, got [{low:g}, {high:g}]")
    if isinstance(size, bool) or int(size) != size or size < 2:
        raise ConfigError(f"a label grid needs at least 2 points, got {size!r}")
    return np.linspace(low, high, int(size))


def snap_to_grid(values, grid: np.ndarray, where: str = "labels") -> np.ndarray:
    """The index of the grid point nearest to each value after clipping it to [grid[0], grid[-1]]
    (ties to the lower point). A missing or infinite value is an error (raised before any release,
    and without saying which or how many: the values are private)."""
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1 or array.size == 0:
        raise DataError(f"the {where} must be a non-empty 1-d array of numbers")
    if not np.all(np.isfinite(array)):
        raise DataError(f"the {where} contain missing or infinite values")
    grid = np.asarray(grid, dtype=np.float64)
    midpoints = (grid[1:] + grid[:-1]) / 2
    return np.searchsorted(midpoints, np.clip(array, grid[0], grid[-1]), side="left").astype(np.int64)


def regression_dataset(name: str, x_train, values_train, x_test, values_test, grid, **extra) -> LabeledDataset:
    """A regression dataset from raw values: labels snapped to ``grid`` (public, declared), the raw test
    values kept for the test error. ``extra`` goes to :class:`LabeledDataset` (``categorical``...)."""
    grid = np.asarray(grid, dtype=np.float64)
    return LabeledDataset(name, x_train, snap_to_grid(values_train, grid, "training labels"), x_test,
                          snap_to_grid(values_test, grid, "test labels"), num_classes=grid.size, label_values=grid,
                          y_test_values=np.asarray(values_test, dtype=np.float64),
                          class_names=[f"{v:g}" for v in grid], **extra)


def load_regression_table(path: str | Path, label_column: str, grid: np.ndarray, test_path: str | Path | None = None,
                          test_fraction: float = 0.2, seed: int = 0) -> LabeledDataset:
    """A table (CSV or Parquet) with numeric feature columns and a numeric label column, as a
    regression on ``grid``; features standardised with training statistics, the test rows chosen as
    :func:`labeldp.data.table.load_table_dataset` chooses them (by position, from the seed)."""
    import pandas as pd

    from labeldp.data.table import _read
    from labeldp.randomness import public_rng

    frame = _read(Path(path))
    if label_column not in frame.columns:
        raise DataError(f"label column {label_column!r} not found; columns are {list(frame.columns)}")
    if test_path is None:
        if not 0.0 < test_fraction < 1.0:
            raise DataError(f"test_fraction must lie in (0, 1), got {test_fraction}")
        order = public_rng(seed, "table-split").permutation(len(frame))
        n_test = max(1, int(round(test_fraction * len(frame))))
        train, test = frame.iloc[order[n_test:]], frame.iloc[order[:n_test]]
    else:
        train, test = frame, _read(Path(test_path))
    features = [c for c in frame.columns if c != label_column]
    missing = [c for c in features + [label_column] if c not in test.columns]
    if missing:
        raise DataError(f"test table lacks columns {missing}")
    non_numeric = [c for c in features + [label_column] if not pd.api.types.is_numeric_dtype(frame[c])]
    if non_numeric:
        raise DataError(f"a regression table's columns must be numeric; encode these first: {non_numeric}")
    x_train = train[features].to_numpy(np.float64)
    x_test = test[features].to_numpy(np.float64)
    if not (np.isfinite(x_train).all() and np.isfinite(x_test).all()):
        raise DataError("feature columns contain NaN or infinite values")
    mean, std = x_train.mean(axis=0), x_train.std(axis=0) + 1e-8
    return regression_dataset(Path(path).stem, (x_train - mean) / std, train[label_column].to_numpy(np.float64),
                              (x_test - mean) / std, test[label_column].to_numpy(np.float64), grid)
