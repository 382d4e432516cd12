"""The Laplace mechanism on a numeric label, on an exact grid: the regression baseline.

Labels are indices into a public, evenly spaced grid of G values (a clipped, declared range, see
:mod:`labeldp.data.grid`). The grid's points sit at integer positions p_y = y on the lattice
of its step; the release is the integer z = p_y + X with X discrete Laplace, Pr[X = x] proportional
to e^(-a |x|) (:mod:`labeldp.mechanisms.discrete_laplace`), and the released value is
grid[0] + z * step (z may fall outside the range: the noise is never truncated or clamped).

Privacy guarantee (label DP, replace one label): replacing y by y' moves p_y by at most the range,
s = G - 1 steps, and a discrete Laplace variable shifted by s has privacy loss at most a s; with
a = epsilon / s the release is epsilon-DP (``DiscreteLaplaceDpEvent(a, s)``, accounted as pure
(a s)-DP). The noise has scale (high - low) / epsilon in label units, as the continuous Laplace
mechanism on the clipped label would, but the released integer is exact: a continuous Laplace value
added in floating point lands on a grid that betrays the true value (Mironov 2012), this one does
not. The released value is a function of the integer alone.

Numpy only, vectorised over examples.
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
    """The step of an evenly spaced, strictly increasing grid of at least 2 finite values.

    A grid that is not evenly spaced is an error (the mechanism's sensitivity is counted in steps).

    Parameters
    ----------
    grid : array_like
        (G,) label values.

    Returns
    -------
    float
        The step (grid[-1] - grid[0]) / (G - 1).

    Raises
    ------
    labeldp.errors.ConfigError
        If ``grid`` is not a 1-d array of at least 2 finite values, or is not evenly spaced and
        increasing.
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
    """The discrete Laplace parameter a = epsilon / (G - 1) per grid step.

    Parameters
    ----------
    grid : array_like
        (G,) evenly spaced, strictly increasing label values.
    epsilon : float
        Privacy parameter, > 0.

    Returns
    -------
    float
        The parameter a.

    Raises
    ------
    labeldp.errors.ConfigError
        If ``grid`` is not evenly spaced and increasing or ``epsilon`` is not a finite number > 0.
    """
    grid_step(grid)
    return check_epsilon(epsilon) / (np.asarray(grid).size - 1)


def laplace_value(labels, grid, epsilon: float, rng: RandomSource = None) -> np.ndarray:
    """The released integers z = y + discrete Laplace(epsilon / (G - 1)), one per label (grid index y).

    The released value of z is ``grid[0] + z * grid_step(grid)`` (:func:`released_values`). Each
    release is epsilon-label-DP (see the module docstring).

    Parameters
    ----------
    labels : array_like of int
        1-d integer array of true labels as grid indices in [0, G), shape (n,).
    grid : array_like
        (G,) evenly spaced, strictly increasing label values.
    epsilon : float
        Privacy parameter, > 0.
    rng : None, int, str, numpy.random.Generator or labeldp.randomness.SecureGenerator, optional
        Source of the noise (see :mod:`labeldp.randomness`).

    Returns
    -------
    numpy.ndarray
        int64 array of shape (n,), in grid steps (not clamped to [0, G)).

    Raises
    ------
    labeldp.errors.ConfigError
        If ``grid`` is not evenly spaced and increasing, ``epsilon`` is not a finite number > 0,
        ``labels`` is not a 1-d array of integers in [0, G), or ``rng`` is not an accepted source.
    """
    a = laplace_value_parameter(grid, epsilon)
    true = check_labels(labels, np.asarray(grid).size)
    return true + discrete_laplace(a, true.size, rng)


def released_values(noisy_steps, grid) -> np.ndarray:
    """The label values of released integers: grid[0] + z * step (float64).

    Parameters
    ----------
    noisy_steps : array_like of int
        Integers released by :func:`laplace_value`, any shape.
    grid : array_like
        (G,) the evenly spaced grid of the release.

    Returns
    -------
    numpy.ndarray
        float64 array with the shape of ``noisy_steps``.

    Raises
    ------
    labeldp.errors.ConfigError
        If ``grid`` is not evenly spaced and increasing.
    """
    return np.asarray(grid, dtype=np.float64)[0] + np.asarray(noisy_steps, dtype=np.float64) * grid_step(grid)


def laplace_value_log_probabilities(noisy_steps, grid, epsilon: float) -> np.ndarray:
    """Exact log Pr[release z_i | label y] for every released integer z_i and grid index y.

    Equal to log tanh(a/2) - a |z_i - y|.

    Parameters
    ----------
    noisy_steps : array_like of int
        1-d integer array of released integers (in grid steps), shape (n,).
    grid : array_like
        (G,) the evenly spaced grid of the release.
    epsilon : float
        The privacy parameter of the release, > 0.

    Returns
    -------
    numpy.ndarray
        float64 array of shape (n, G).

    Raises
    ------
    labeldp.errors.ConfigError
        If ``grid`` is not evenly spaced and increasing, ``epsilon`` is not a finite number > 0, or
        ``noisy_steps`` is not a 1-d integer array.
    """
    a = laplace_value_parameter(grid, epsilon)
    z = np.asarray(noisy_steps)
    if z.ndim != 1 or z.dtype.kind not in "iu":
        raise ConfigError("noisy_steps must be a 1-d integer array of released values (in grid steps)")
    distance = np.abs(z.astype(np.float64)[:, None] - np.arange(np.asarray(grid).size, dtype=np.float64)[None, :])
    return np.log(np.tanh(a / 2)) - a * distance


def laplace_value_likelihood(noisy_steps, grid, epsilon: float) -> np.ndarray:
    """The noise channel L[i, y] proportional to Pr[z_i | y], normalised over y.

    Each row's common factor cancels in a posterior and in the forward loss. Uses only released values
    and public parameters.

    Parameters
    ----------
    noisy_steps : array_like of int
        1-d integer array of released integers (in grid steps), shape (n,).
    grid : array_like
        (G,) the evenly spaced grid of the release.
    epsilon : float
        The privacy parameter of the release, > 0.

    Returns
    -------
    numpy.ndarray
        float64 array of shape (n, G); each row sums to 1.

    Raises
    ------
    labeldp.errors.ConfigError
        As :func:`laplace_value_log_probabilities`.
    """
    log_probability = laplace_value_log_probabilities(noisy_steps, grid, epsilon)
    likelihood = np.exp(log_probability - log_probability.max(axis=1, keepdims=True))
    return likelihood / likelihood.sum(axis=1, keepdims=True)
