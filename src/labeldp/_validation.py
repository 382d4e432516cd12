"""Argument checks shared by every layer (numpy only): each raises a ConfigError naming the argument,
so bad input is refused before any privacy budget is spent.
"""

from __future__ import annotations

import math

import numpy as np

from labeldp.errors import ConfigError


def check_contribution(contribution: int) -> int:
    """The most labels one privacy unit changes, checked to be a whole number >= 1."""
    if int(contribution) != contribution or contribution < 1:
        raise ConfigError(f"contribution must be a whole number of at least 1, got {contribution!r}")
    return int(contribution)


#: the smallest epsilon accepted (RR at 1e-6 keeps a label with probability 1/K + 2.5e-7 for K = 2)
MIN_EPSILON = 1e-6


def check_epsilon(epsilon: float, name: str = "epsilon") -> float:
    """``epsilon`` as a float, checked to be finite and at least :data:`MIN_EPSILON`."""
    try:
        value = float(epsilon)
    except (TypeError, ValueError):
        raise ConfigError(f"{name} must be a number, got {epsilon!r}") from None
    if math.isnan(value) or value <= 0 or math.isinf(value):
        raise ConfigError(f"{name} must be a finite number > 0, got {epsilon!r}")
    if value < MIN_EPSILON:  # below it a mechanism's probabilities round to uniform in float64 arithmetic
        raise ConfigError(f"{name} must be at least {MIN_EPSILON:g}, got {epsilon!r}")
    return value


def check_num_classes(num_classes: int) -> int:
    """``num_classes`` as an int, checked to be an integer (not a bool) >= 2."""
    if isinstance(num_classes, bool) or not isinstance(num_classes, (int, np.integer)):
        raise ConfigError(f"num_classes must be an integer, got {num_classes!r}")
    if num_classes < 2:
        raise ConfigError(f"num_classes must be at least 2, got {num_classes}")
    return int(num_classes)


def check_labels(labels, num_classes: int, name: str = "labels") -> np.ndarray:
    """``labels`` as a 1-d int64 array of whole values in [0, num_classes).

    The messages never say which labels are wrong, nor how many: the labels may be private.
    """
    array = np.asarray(labels)
    if array.ndim != 1:
        raise ConfigError(f"{name} must be a 1-d array, got shape {array.shape}")
    if array.size == 0:
        raise ConfigError(f"{name} is empty")
    if array.dtype.kind == "f":
        if not np.all(np.isfinite(array)):
            raise ConfigError(f"{name} contains NaN or infinite values")
        if not np.all(array == np.round(array)):
            raise ConfigError(f"{name} must be integers (which are not is not said: labels may be private)")
    elif array.dtype.kind not in "iu":
        raise ConfigError(f"{name} must be integer class indices, got dtype {array.dtype}")
    array = array.astype(np.int64)
    if array.min() < 0 or array.max() >= num_classes:
        raise ConfigError(
            f"{name} must lie in [0, {num_classes}); some do not (which, and how many, is not said: "
            "labels may be private)"
        )
    return array


#: prior entries checked at a time (1 MiB of float64: a block stays in cache for its three reductions)
_CHECK_ENTRIES = 1 << 17


def check_priors(priors, atol: float = 1e-6) -> np.ndarray:
    """``priors`` as an (n, K >= 2) float64 array of finite, non-negative rows summing to 1 within ``atol``."""
    array = np.asarray(priors, dtype=np.float64)
    if array.ndim != 2:
        raise ConfigError(f"priors must be a 2-d (n, num_classes) array, got shape {array.shape}")
    if array.shape[0] == 0:
        raise ConfigError("priors is empty")
    if array.shape[1] < 2:
        raise ConfigError(f"priors must have at least 2 columns (classes), got {array.shape[1]}")
    ones = np.ones(array.shape[1])
    rows = max(1, _CHECK_ENTRIES // array.shape[1])
    # A block's row sums may round differently from the whole array's (BLAS splits the work by the
    # array's shape), by less than (K + 2) 2^-52 (1 + atol) once the sum is within atol of 1 (K
    # non-negative addends, each order within (K - 1) 2^-53 of the exact sum, then one rounded
    # subtraction). A block passes only with four times that margin to spare; a row nearer the edge
    # takes the whole array's check, which alone decides it, as before the blocks.
    within = atol - (array.shape[1] + 2) * 2.0**-50 * (1.0 + abs(atol))
    for start in range(0, array.shape[0], rows):
        block = array[start : start + rows]
        sums = block @ ones
        np.subtract(sums, 1.0, out=sums)
        # NaN fails every comparison, so a NaN anywhere in the block takes the whole-array check too
        if not (block.min() >= 0 and block.max() < np.inf and np.abs(sums, out=sums).max() <= within):
            _check_whole_priors(array, atol)
            break
    return array


def _check_whole_priors(array: np.ndarray, atol: float) -> None:
    """The whole array's first problem as a ConfigError, in a fixed order (non-finite, negative, sums)."""
    low, high = array.min(), array.max()
    if np.isnan(low) or np.isnan(high) or np.isinf(high):
        raise ConfigError("priors contains NaN or infinite values")
    if low < 0:
        row = int(np.argwhere(array < 0)[0, 0])
        raise ConfigError(f"priors must be non-negative, row {row} has a negative entry")
    sums = array @ np.ones(array.shape[1])
    off = np.abs(sums - 1.0) > atol
    if np.any(off):
        row = int(np.flatnonzero(off)[0])
        raise ConfigError(f"each row of priors must sum to 1, row {row} sums to {sums[row]:.6g}")


def check_same_length(**arrays) -> int:
    """The common length of the ``arrays``, named as the error message names them."""
    lengths = {name: len(value) for name, value in arrays.items()}
    if len(set(lengths.values())) > 1:
        described = ", ".join(f"{name} has {length}" for name, length in lengths.items())
        raise ConfigError(f"length mismatch: {described}")
    return next(iter(lengths.values()))


def check_finite_features(features, name: str = "inputs") -> np.ndarray:
    """``features`` as a non-empty numeric or boolean array with no NaN or infinity (not copied)."""
    array = np.asarray(features)
    if array.size == 0 or len(array) == 0:
        raise ConfigError(f"{name} is empty")
    if array.dtype.kind == "f" and not np.all(np.isfinite(array)):
        raise ConfigError(f"{name} contains NaN or infinite values")
    if array.dtype.kind not in "fiub":
        raise ConfigError(f"{name} must be numeric, got dtype {array.dtype}")
    return array
