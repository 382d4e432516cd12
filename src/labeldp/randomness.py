"""Sources of randomness: seeded numpy generators and a cryptographically secure one.

Every random function in labeldp takes ``rng``: ``None`` (fresh OS entropy), an integer seed, a
``numpy.random.Generator``, or ``"secure"`` / a :class:`SecureGenerator`. Seeded generators make runs
reproducible; numpy's PCG64 is not a cryptographic generator, so production releases of private
labels should use ``rng="secure"``, which draws every bit from the operating system's CSPRNG
(``os.urandom``).
"""

from __future__ import annotations

import os
from typing import Union

import numpy as np

_UINT64_RANGE = 2**64


class SecureGenerator:
    """The subset of ``numpy.random.Generator`` used by the mechanisms, backed by ``os.urandom``.

    ``random`` returns floats with 53 random bits; ``integers`` is exactly uniform (rejection
    sampling on 64-bit words), so no modulo bias is introduced; ``normal`` applies the Box-Muller
    transform to such uniforms in float64 (like every floating-point Gaussian sampler, it is not an
    exact discrete Gaussian).
    """

    def _words(self, count: int) -> np.ndarray:
        return np.frombuffer(os.urandom(8 * count), dtype=np.uint64).copy()

    def random(self, size: int | tuple[int, ...] | None = None) -> np.ndarray | float:
        shape = () if size is None else size
        count = int(np.prod(shape))
        values = (self._words(count) >> np.uint64(11)).astype(np.float64) * 2.0**-53
        return float(values[0]) if size is None else values.reshape(shape)

    def normal(self, loc: float = 0.0, scale: float = 1.0, size: int | tuple[int, ...] | None = None
               ) -> np.ndarray | float:
        """Normal deviates N(loc, scale^2) (numpy's signature)."""
        shape = () if size is None else ((size,) if np.isscalar(size) else tuple(size))
        count = int(np.prod(shape))
        pairs = (count + 1) // 2
        u1 = 1.0 - self.random(pairs)  # in (0, 1], so the logarithm is finite
        u2 = self.random(pairs)
        radius = np.sqrt(-2.0 * np.log(u1))
        normals = np.concatenate([radius * np.cos(2 * np.pi * u2), radius * np.sin(2 * np.pi * u2)])[:count]
        values = loc + scale * normals
        return float(values[0]) if size is None else values.reshape(shape)

    def integers(self, low, high=None, size=None) -> np.ndarray:
        """Uniform integers in [low, high) (numpy's convention: one argument means [0, low))."""
        if high is None:
            low, high = 0, low
        low_arr = np.asarray(low, dtype=np.int64)
        high_arr = np.asarray(high, dtype=np.int64)
        shape = np.broadcast_shapes(low_arr.shape, high_arr.shape) if size is None else (
            (size,) if np.isscalar(size) else tuple(size))
        span = np.broadcast_to(high_arr - low_arr, shape).astype(np.uint64).ravel()
        if np.any(span == 0):
            raise ValueError("integers: high must be greater than low")
        # Accept a 64-bit word w only if w < limit, the largest multiple of span that fits.
        limit = (np.uint64(_UINT64_RANGE - 1) // span) * span
        out = np.empty(span.size, dtype=np.uint64)
        pending = np.arange(span.size)
        while pending.size:
            words = self._words(pending.size)
            ok = words < limit[pending]
            out[pending[ok]] = words[ok] % span[pending[ok]]
            pending = pending[~ok]
        return (out.astype(np.int64).reshape(shape) + np.broadcast_to(low_arr, shape))


RandomSource = Union[None, int, np.random.Generator, SecureGenerator, str]


def as_generator(rng: RandomSource) -> np.random.Generator | SecureGenerator:
    """Turn any accepted ``rng`` argument into an object with ``random``, ``integers`` and ``normal``."""
    if isinstance(rng, (np.random.Generator, SecureGenerator)):
        return rng
    if isinstance(rng, str):
        if rng == "secure":
            return SecureGenerator()
        raise ValueError(f"rng must be None, an int seed, a numpy Generator or 'secure', got {rng!r}")
    if rng is None or (isinstance(rng, (int, np.integer)) and not isinstance(rng, bool)):
        return np.random.default_rng(rng)
    raise TypeError(f"rng must be None, an int seed, a numpy Generator or 'secure', got {type(rng).__name__}")
