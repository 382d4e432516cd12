"""Exact integer noise: geometric and discrete Laplace variables, without floating-point holes.

Noise added in floating point leaks through the grid its results land on (Mironov, CCS 2012), so
labeldp's noisy releases are integers (or integers scaled by a public power of two), with discrete
Laplace noise Pr[X = x] = tanh(a/2) e^(-a|x|): the difference of two geometric variables,
Pr[G >= g] = e^(-a g).

A geometric variable is drawn as G = B N + R, B = max(1, ceil(1 / a)): N counts blocks passed, each
continued with probability c = e^(-a B) <= 1/e (a fresh uniform per block), and R is the inverse
distribution function of a uniform on {0, ..., B - 1}. Nothing is truncated: every integer keeps a
positive probability, the ideal one within a relative 1e-9 for B up to 10^6, so the privacy loss is
the nominal one up to that rounding. A c that underflows (a above about 745) is raised to the
smallest positive float, so the noise never becomes identically zero.
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
    """``count`` exact int64 samples of G on {0, 1, ...} with Pr[G >= g] = e^(-parameter g)."""
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
    """int64 samples of shape ``size`` of Pr[X = x] = tanh(a/2) e^(-a |x|), a = ``parameter``."""
    gen = as_generator(rng)
    shape = (size,) if isinstance(size, (int, np.integer)) else tuple(size)
    count = int(np.prod(shape))
    both = geometric(parameter, 2 * count, gen)
    return (both[:count] - both[count:]).reshape(shape)


def discrete_laplace_pmf(values, parameter: float) -> np.ndarray:
    """Exact probabilities of :func:`discrete_laplace` at integer ``values``."""
    a = _check_parameter(parameter)
    return np.tanh(a / 2) * np.exp(-a * np.abs(np.asarray(values, dtype=np.float64)))
