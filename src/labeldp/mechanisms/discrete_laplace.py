"""Exact integer noise: geometric and discrete Laplace variables, sampled without floating-point holes.

Noise added in floating point leaks through the grid its results land on (Mironov, "On significance
of the least significant bits for differential privacy", CCS 2012): fl(1 + L) and fl(L) are
representable on different grids, so a continuous Laplace release can betray which coordinate
carried the signal. labeldp's noisy releases are therefore integers (or integers scaled by a public
power of two), with the discrete Laplace distribution Pr[X = x] = tanh(a/2) e^(-a|x|).

The sampler: a discrete Laplace variable is the difference of two independent geometric ones,
Pr[G >= g] = e^(-a g). A geometric variable is drawn as G = B N + R with a block length
B = max(1, ceil(1 / a)): N counts the blocks passed, each continued with probability c = e^(-a B)
(at most 1/e), by comparing a fresh uniform with c until one fails; R, the position in the last block,
is the inverse distribution function of a uniform on {0, ..., B - 1}. Both parts are exact up to
the 2^-53 resolution of a uniform, and neither is truncated: every integer keeps a positive
probability, equal to the ideal one up to a relative error below 1e-9 for B up to 10^6, so the privacy
loss between neighbours is the nominal one up to that rounding. A continuation probability that
underflows (a above about 745) is raised to the smallest positive float, which the uniform's grid
turns into 2^-53: the noise then never becomes identically zero.
"""

from __future__ import annotations

import numpy as np

from labeldp.errors import ConfigError
from labeldp.randomness import RandomSource, as_generator

#: the smallest positive float: a continuation probability that underflowed is raised to it
_TINY = np.nextafter(0.0, 1.0)


def _check_parameter(parameter: float) -> float:
    value = float(parameter)
    if not value > 0 or not np.isfinite(value):
        raise ConfigError(f"discrete Laplace parameter must be a finite number > 0, got {parameter}")
    return value


def geometric(parameter: float, count: int, rng: RandomSource = None) -> np.ndarray:
    """``count`` samples of G on {0, 1, ...} with Pr[G >= g] = e^(-parameter g) (int64).

    Drawn exactly, without truncation, as described in the module docstring.

    Parameters
    ----------
    parameter : float
        The decay a > 0 of the distribution.
    count : int
        Number of samples.
    rng : None, int, str, numpy.random.Generator or labeldp.randomness.SecureGenerator, optional
        Source of the noise (see :mod:`labeldp.randomness`).

    Returns
    -------
    numpy.ndarray
        int64 array of shape (count,).

    Raises
    ------
    labeldp.errors.ConfigError
        If ``parameter`` is not a finite number > 0, or ``rng`` is not an accepted source.
    """
    a = _check_parameter(parameter)
    gen = as_generator(rng)
    block = max(1, int(np.ceil(1.0 / a)))
    carry = max(float(np.exp(-a * block)), _TINY)
    # Position in the block: Pr[R = r] proportional to e^(-a r) on {0, ..., block - 1}.
    tail = np.log1p(-gen.random(count) * (1.0 - carry)) / -a
    result = np.minimum(np.floor(tail), block - 1).astype(np.int64)
    # Whole blocks passed: keep adding one while a fresh uniform falls below the carry probability.
    alive = np.arange(count)
    while alive.size:
        alive = alive[gen.random(alive.size) < carry]
        result[alive] += block
    return result


def discrete_laplace(parameter: float, size: int | tuple[int, ...], rng: RandomSource = None) -> np.ndarray:
    """Samples of the discrete Laplace distribution Pr[X = x] = tanh(a/2) e^(-a |x|) on the integers.

    ``a = parameter`` (int64 samples), drawn as the difference of two :func:`geometric` samples.

    Parameters
    ----------
    parameter : float
        The decay a > 0 of the distribution.
    size : int or tuple of int
        Shape of the output.
    rng : None, int, str, numpy.random.Generator or labeldp.randomness.SecureGenerator, optional
        Source of the noise (see :mod:`labeldp.randomness`).

    Returns
    -------
    numpy.ndarray
        int64 array of shape ``size``.

    Raises
    ------
    labeldp.errors.ConfigError
        If ``parameter`` is not a finite number > 0, or ``rng`` is not an accepted source.
    """
    gen = as_generator(rng)
    shape = (size,) if np.isscalar(size) else tuple(size)
    count = int(np.prod(shape))
    both = geometric(parameter, 2 * count, gen)
    return (both[:count] - both[count:]).reshape(shape)


def discrete_laplace_pmf(values, parameter: float) -> np.ndarray:
    """Exact probabilities of :func:`discrete_laplace` at integer ``values``.

    Parameters
    ----------
    values : array_like
        Integers at which to evaluate the distribution, any shape.
    parameter : float
        The decay a > 0 of the distribution.

    Returns
    -------
    numpy.ndarray
        float64 array tanh(a/2) e^(-a |x|), with the shape of ``values``.

    Raises
    ------
    labeldp.errors.ConfigError
        If ``parameter`` is not a finite number > 0.
    """
    a = _check_parameter(parameter)
    return np.tanh(a / 2) * np.exp(-a * np.abs(np.asarray(values, dtype=np.float64)))
