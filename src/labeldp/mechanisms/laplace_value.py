"""The Laplace mechanism on a numeric label, on an exact grid: the regression baseline.

Labels are indices y into a public, evenly spaced grid of G values (:mod:`labeldp.data.grid`). The
release is the integer z = y + X, X discrete Laplace with parameter a, and its value is
grid[0] + z * step, never clamped.

Privacy guarantee (label DP, replace one label): replacing y moves z by at most s = G - 1 steps, a
privacy loss of at most a s; with a = epsilon / s the release is epsilon-DP
(``DiscreteLaplaceDpEvent(a, s)``). The noise has the continuous Laplace mechanism's scale
(high - low) / epsilon, but the released integer is exact (Mironov 2012).
"""

from __future__ import annotations

import numpy as np

from labeldp._validation import check_epsilon, check_labels
from labeldp.errors import ConfigError
from labeldp.mechanisms.discrete_laplace import discrete_laplace
from labeldp.randomness import RandomSource

#: relative tolerance of the check that a grid is evenly spaced (linspace's rounding is far below it)
_SPACING_RTOL = 1e-9


def grid_step(grid) -> float:
    """The step of an evenly spaced, increasing grid; any other grid raises ConfigError (the sensitivity is
    counted in steps).
    """
    array = np.asarray(grid, dtype=np.float64)
    if array.ndim != 1 or array.size < 2 or not np.all(np.isfinite(array)):
        raise ConfigError(f"grid must be a 1-d array of at least 2 finite values, got shape {array.shape}")
    steps = np.diff(array)
    step = (array[-1] - array[0]) / (array.size - 1)
    if not step > 0 or np.any(np.abs(steps - step) > _SPACING_RTOL * (array[-1] - array[0])):
        raise ConfigError(
            "the Laplace mechanism on a label needs an evenly spaced, increasing grid "
            "(e.g. --label-range LOW HIGH --label-grid G)"
        )
    return float(step)


def laplace_value_parameter(grid, epsilon: float) -> float:
    """The discrete Laplace parameter a = epsilon / (G - 1) per grid step."""
    grid_step(grid)
    return check_epsilon(epsilon) / (np.asarray(grid).size - 1)


def laplace_value(labels, grid, epsilon: float, rng: RandomSource = None) -> np.ndarray:
    """The released integers z = y + discrete Laplace(epsilon / (G - 1)), in grid steps: epsilon-label-DP
    each. :func:`released_values` gives their values.
    """
    a = laplace_value_parameter(grid, epsilon)
    true = check_labels(labels, np.asarray(grid).size)
    return true + discrete_laplace(a, true.size, rng)


def released_values(noisy_steps, grid) -> np.ndarray:
    """The label values grid[0] + z * step of released integers."""
    return np.asarray(grid, dtype=np.float64)[0] + np.asarray(noisy_steps, dtype=np.float64) * grid_step(grid)


def laplace_value_log_probabilities(noisy_steps, grid, epsilon: float) -> np.ndarray:
    """Exact (n, G) log Pr[release z_i | grid index y] = log tanh(a/2) - a |z_i - y|."""
    a = laplace_value_parameter(grid, epsilon)
    z = np.asarray(noisy_steps)
    if z.ndim != 1 or z.dtype.kind not in "iu":
        raise ConfigError("noisy_steps must be a 1-d integer array of released values (in grid steps)")
    distance = np.abs(z.astype(np.float64)[:, None] - np.arange(np.asarray(grid).size, dtype=np.float64)[None, :])
    return np.log(np.tanh(a / 2)) - a * distance


def laplace_value_likelihood(noisy_steps, grid, epsilon: float) -> np.ndarray:
    """The (n, G) noise channel Pr[z_i | y], normalised over y (a row's common factor cancels in a posterior
    and in the forward loss). Free of privacy cost.
    """
    log_probability = laplace_value_log_probabilities(noisy_steps, grid, epsilon)
    likelihood = np.exp(log_probability - log_probability.max(axis=1, keepdims=True))
    return likelihood / likelihood.sum(axis=1, keepdims=True)
