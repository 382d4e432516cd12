"""Argument checks shared by every layer (numpy only).

Each check raises a ``ValueError`` (or ``TypeError``) whose message names the offending argument,
so that bad input is refused before any privacy budget is spent.
"""

from __future__ import annotations

import math

import numpy as np

from labeldp.errors import ConfigError


def check_contribution(contribution: int) -> int:
    """The number of labels one privacy unit changes at most, as a positive int.

    Parameters
    ----------
    contribution : int
        The most labels of one unit among those a release reads.

    Returns
    -------
    int
        ``contribution``.

    Raises
    ------
    labeldp.errors.ConfigError
        If it is not a whole number of at least 1.
    """
    if int(contribution) != contribution or contribution < 1:
        raise ConfigError(f"contribution must be a whole number of at least 1, got {contribution!r}")
    return int(contribution)


#: the smallest epsilon accepted (RR at 1e-6 keeps a label with probability 1/K + 2.5e-7 for K = 2)
MIN_EPSILON = 1e-6


def check_epsilon(epsilon: float, name: str = "epsilon") -> float:
    """Return ``epsilon`` as a float after checking it is a finite number > 0.

    Parameters
    ----------
    epsilon : float
        The privacy parameter (anything ``float()`` accepts).
    name : str, optional
        The argument's name in the error message (default ``"epsilon"``).

    Returns
    -------
    float
        ``epsilon`` as a float.

    Raises
    ------
    labeldp.errors.ConfigError
        If ``epsilon`` is not a number, or is NaN, infinite or <= 0.
    """
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
    """Return ``num_classes`` as an int after checking it is an integer >= 2.

    Parameters
    ----------
    num_classes : int
        K, the number of classes (a Python or numpy integer; a bool is refused).

    Returns
    -------
    int
        ``num_classes`` as an int.

    Raises
    ------
    labeldp.errors.ConfigError
        If ``num_classes`` is not an integer, or is less than 2.
    """
    if isinstance(num_classes, bool) or not isinstance(num_classes, (int, np.integer)):
        raise ConfigError(f"num_classes must be an integer, got {num_classes!r}")
    if num_classes < 2:
        raise ConfigError(f"num_classes must be at least 2, got {num_classes}")
    return int(num_classes)


def check_labels(labels, num_classes: int, name: str = "labels") -> np.ndarray:
    """Return ``labels`` as a 1-d int64 array after checking its values lie in [0, num_classes).

    The messages never say which labels are wrong, nor how many: the labels may be private.

    Parameters
    ----------
    labels : array_like of int
        The class indices, one per example (integers, or floats holding whole numbers).
    num_classes : int
        K: every label must lie in [0, K).
    name : str, optional
        The argument's name in the error message (default ``"labels"``).

    Returns
    -------
    numpy.ndarray
        (n,) int64 array of the labels.

    Raises
    ------
    labeldp.errors.ConfigError
        If ``labels`` is not 1-d, is empty, holds NaN, infinite or fractional values, is not of a
        numeric dtype, or has a value outside [0, num_classes).
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


def check_priors(priors, atol: float = 1e-6) -> np.ndarray:
    """Return ``priors`` as an (n, K) float64 array of probability distributions (one per row).

    Parameters
    ----------
    priors : array_like
        (n, K) rows of probabilities, K >= 2.
    atol : float, optional
        How far a row's sum may be from 1 (default 1e-6).

    Returns
    -------
    numpy.ndarray
        (n, K) float64 array of the priors.

    Raises
    ------
    labeldp.errors.ConfigError
        If ``priors`` is not 2-d, has no rows or fewer than 2 columns, holds NaN, infinite or negative
        values, or has a row whose sum is not 1 within ``atol``.
    """
    array = np.asarray(priors, dtype=np.float64)
    if array.ndim != 2:
        raise ConfigError(f"priors must be a 2-d (n, num_classes) array, got shape {array.shape}")
    if array.shape[0] == 0:
        raise ConfigError("priors is empty")
    if array.shape[1] < 2:
        raise ConfigError(f"priors must have at least 2 columns (classes), got {array.shape[1]}")
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
    return array


def check_same_length(**arrays) -> int:
    """Check that all given arrays have the same first dimension and return it.

    Parameters
    ----------
    **arrays : array_like
        The arrays, by the names the error message gives them (at least one).

    Returns
    -------
    int
        Their common length.

    Raises
    ------
    labeldp.errors.ConfigError
        If two of the arrays differ in length.
    """
    lengths = {name: len(value) for name, value in arrays.items()}
    if len(set(lengths.values())) > 1:
        described = ", ".join(f"{name} has {length}" for name, length in lengths.items())
        raise ConfigError(f"length mismatch: {described}")
    return next(iter(lengths.values()))


def check_finite_features(features, name: str = "inputs") -> np.ndarray:
    """Return ``features`` as an array after checking it is non-empty and has no NaN/inf.

    Parameters
    ----------
    features : array_like
        The (public) inputs, one row per example.
    name : str, optional
        The argument's name in the error message (default ``"inputs"``).

    Returns
    -------
    numpy.ndarray
        ``features`` as an array (not copied when it is one already).

    Raises
    ------
    labeldp.errors.ConfigError
        If ``features`` is empty, holds NaN or infinite values, or is not of a numeric or boolean dtype.
    """
    array = np.asarray(features)
    if array.size == 0 or len(array) == 0:
        raise ConfigError(f"{name} is empty")
    if array.dtype.kind == "f" and not np.all(np.isfinite(array)):
        raise ConfigError(f"{name} contains NaN or infinite values")
    if array.dtype.kind not in "fiub":
        raise ConfigError(f"{name} must be numeric, got dtype {array.dtype}")
    return array
