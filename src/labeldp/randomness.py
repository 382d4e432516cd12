"""Randomness: private noise that nothing saved can reproduce, and public streams named by purpose.

**Noise** is what the guarantee rests on (randomized response's coins, histogram and Laplace noise,
PATE's vote noise, DP-SGD's sampling and gradient noise): whoever could regenerate it would subtract
it and read the labels, so a :class:`NoiseSource` never derives it from anything a run writes down.

- ``NoiseSource()`` (the default): numpy's PCG64 seeded with 128 bits of fresh OS entropy for the
  label releases; for DP-SGD ChaCha20 on the CPU (torch's CPU generator keeps only 32 bits of a
  seed) or a CUDA generator seeded with 63 fresh bits. Never written or printed: it protects against
  everyone who reads what labeldp saves or shows. PCG64 and Philox are not cryptographic: an attacker
  who recovered their state from raw outputs could predict later draws, which the next option excludes.
- ``NoiseSource(secure=True)`` (``--secure-rng``): everything from :class:`SecureGenerator`, ChaCha20
  keyed with 256 bits of OS entropy, a cryptographically secure generator.
- ``NoiseSource(insecure_seed=S)`` (``--insecure-noise-seed``): every draw derived from S, written to
  ``config.json``. Reproducible and **not private**: for tests and debugging, and a run says so.

**Public streams** control everything that depends on no label (splits, initialisation, data order,
augmentation, k-means), from the user's ``--seed`` through :func:`public_rng` and :func:`public_seed`,
each named by its purpose: a run is reproducible from its configuration and its saved releases.

The ``rng`` argument of library functions (:func:`as_generator`): ``None`` (fresh entropy, the
default), ``"secure"`` or a :class:`SecureGenerator`, a ``numpy.random.Generator``, or an integer
seed (reproducible, hence not private: for tests and experiments whose noise may be known).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms

from labeldp.errors import ConfigError

_UINT64_RANGE = 2**64

#: Every seeded stream labeldp uses, by purpose: stream ``name`` with ``ids`` draws from
#: ``SeedSequence([seed, number, *ids])``. Public streams take the run's ``--seed``; noise streams
#: are seeded only in the insecure mode. The numbers are disjoint, so no two purposes draw alike.
PUBLIC_STREAMS = {
    "stage-split": 0,
    "model-init": 1,
    "training": 2,
    "pate-teachers": 3,
    "pate-queries": 4,
    "table-split": 5,
    "encoder": 6,
    "clusters": 7,
    "audit": 8,
    "membership": 9,
    "dpsgd-augment": 10,
    "pate-partition": 11,
    "pate-training": 12,
    "ratings-split": 13,
    "validation-split": 14,
    "tune-holdout": 15,
    "tune-search": 16,
    "unit-rows": 17,
    "unit-split": 18,
    "dropout": 19,
}
NOISE_STREAMS = {
    "label-release": 100,
    "histogram": 101,
    "pate-votes": 102,
    "dpsgd-sampling": 103,
    "dpsgd-noise": 104,
    "table-release": 105,
    "tune-selection": 106,
}


def _sequence(seed: int, streams: dict[str, int], purpose: str, ids: tuple[int, ...]) -> np.random.SeedSequence:
    if purpose not in streams:
        raise ConfigError(f"unknown random stream {purpose!r}; known: {', '.join(streams)}")
    return np.random.SeedSequence([int(seed), streams[purpose], *map(int, ids)])


def public_rng(seed: int, purpose: str, *ids: int) -> np.random.Generator:
    """The reproducible generator of public stream ``purpose`` (a key of :data:`PUBLIC_STREAMS`): not noise."""
    return np.random.default_rng(_sequence(seed, PUBLIC_STREAMS, purpose, ids))


def public_seed(seed: int, purpose: str, *ids: int) -> int:
    """A 63-bit seed of public stream ``purpose``, for ``torch.Generator.manual_seed``."""
    return int(_sequence(seed, PUBLIC_STREAMS, purpose, ids).generate_state(1, np.uint64)[0] >> np.uint64(1))


def box_muller(radius_uniforms, angle_uniforms, count: int, xp: Any = np):
    """``count`` standard normal deviates from ceil(count / 2) radius and as many angle uniforms in [0, 1).

    The radius uniforms set the tails: on float64's 2^-53 grid no deviate is cut off before 8.57
    standard deviations (5.77 on float32's 2^-24); the angles set the result's dtype. ``xp`` is numpy or
    torch (whose vectorised cos and sin are faster). Like every floating-point Gaussian sampler, not an
    exact discrete Gaussian.
    """
    radius = xp.sqrt(-2.0 * xp.log1p(-radius_uniforms))  # log(1 - u) with u in [0, 1): finite
    angle = (2 * math.pi) * angle_uniforms
    radius = radius.astype(angle.dtype) if xp is np else radius.to(angle.dtype)  # the result's precision
    return xp.concatenate([radius * xp.cos(angle), radius * xp.sin(angle)])[:count]


class SecureGenerator:
    """A cryptographically secure generator with the part of ``numpy.random.Generator``'s interface labeldp uses.

    64-bit words of the ChaCha20 keystream (the ``cryptography`` package, i.e. OpenSSL) under a key and
    nonce of 384 bits from ``os.urandom``, never saved. ``random`` gives floats on the 2^-53 grid of
    [0, 1); ``integers`` is exactly uniform (rejection sampling, no modulo bias); ``normal`` is
    :func:`box_muller` in float64. It is faster than reading ``os.urandom``.
    """

    def __init__(self) -> None:
        self._stream = Cipher(algorithms.ChaCha20(os.urandom(32), os.urandom(16)), mode=None).encryptor()

    def words(self, count: int) -> np.ndarray:
        """``count`` uniformly random 64-bit words (uint64)."""
        return np.frombuffer(self._stream.update(bytes(8 * count)), dtype=np.uint64)

    def random(self, size: int | tuple[int, ...] | None = None) -> np.ndarray | float:
        """Uniform float64 values on the 2^-53 grid of [0, 1) (numpy's signature)."""
        shape = () if size is None else size
        values = (self.words(int(np.prod(shape))) >> np.uint64(11)).astype(np.float64) * 2.0**-53
        return float(values[0]) if size is None else values.reshape(shape)

    def normal(
        self, loc: float = 0.0, scale: float = 1.0, size: int | tuple[int, ...] | None = None
    ) -> np.ndarray | float:
        """Normal deviates N(loc, scale^2) (numpy's signature)."""
        shape = () if size is None else ((size,) if isinstance(size, (int, np.integer)) else tuple(size))
        count = int(np.prod(shape))
        pairs = (count + 1) // 2
        values = loc + scale * box_muller(self.random(pairs), self.random(pairs), count)
        return float(values[0]) if size is None else values.reshape(shape)

    def integers(self, low, high=None, size=None) -> np.ndarray:
        """Uniform int64 integers in [low, high) (numpy's convention: one argument means [0, low))."""
        if high is None:
            low, high = 0, low
        low_arr = np.asarray(low, dtype=np.int64)
        high_arr = np.asarray(high, dtype=np.int64)
        shape = (
            np.broadcast_shapes(low_arr.shape, high_arr.shape)
            if size is None
            else ((size,) if np.isscalar(size) else tuple(size))
        )
        difference = np.broadcast_to(high_arr - low_arr, shape)
        if np.any(difference <= 0):
            raise ConfigError("integers: high must be greater than low")
        span = difference.astype(np.uint64).ravel()
        # Accept a 64-bit word w only if w < limit, the largest multiple of span that fits.
        limit = (np.uint64(_UINT64_RANGE - 1) // span) * span
        out = np.empty(span.size, dtype=np.uint64)
        pending = np.arange(span.size)
        while pending.size:
            words = self.words(pending.size)
            ok = words < limit[pending]
            out[pending[ok]] = words[ok] % span[pending[ok]]
            pending = pending[~ok]
        return out.astype(np.int64).reshape(shape) + np.broadcast_to(low_arr, shape)


RandomSource = None | int | np.random.Generator | SecureGenerator | str


def as_generator(rng: RandomSource) -> np.random.Generator | SecureGenerator:
    """Any accepted ``rng`` as a generator (see :mod:`labeldp.randomness`); an unknown kind is a ConfigError."""
    if isinstance(rng, (np.random.Generator, SecureGenerator)):
        return rng
    if isinstance(rng, str):
        if rng == "secure":
            return SecureGenerator()
        raise ConfigError(f"rng must be None, an int seed, a numpy Generator or 'secure', got {rng!r}")
    if rng is None or (isinstance(rng, (int, np.integer)) and not isinstance(rng, bool)):
        return np.random.default_rng(rng)
    raise ConfigError(f"rng must be None, an int seed, a numpy Generator or 'secure', got {type(rng).__name__}")


def fresh_seed() -> int:
    """63 bits of OS entropy, for a torch generator that must be unpredictable."""
    return int.from_bytes(os.urandom(8), "little") >> 1


@dataclass(frozen=True)
class NoiseSource:
    """Where a run's noise comes from (see :mod:`labeldp.randomness`): fresh OS entropy by default.

    Parameters
    ----------
    secure : bool, optional
        Draw everything from :class:`SecureGenerator`.
    insecure_seed : int or None, optional
        Derive every draw from this seed: reproducible and **not private**.

    Attributes
    ----------
    private : bool
        False when the noise can be regenerated from the run's configuration.
    """

    secure: bool = False
    insecure_seed: int | None = None

    def __post_init__(self) -> None:
        if self.secure and self.insecure_seed is not None:
            raise ConfigError("the noise is either secure or reproducible from a seed, not both")

    @property
    def private(self) -> bool:
        """False when the noise can be regenerated from the run's configuration (an insecure seed)."""
        return self.insecure_seed is None

    def generator(self, purpose: str, *ids: int) -> np.random.Generator | SecureGenerator:
        """A generator for noise stream ``purpose`` (a key of :data:`NOISE_STREAMS`, checked in every mode)."""
        if self.insecure_seed is not None:
            return np.random.default_rng(_sequence(self.insecure_seed, NOISE_STREAMS, purpose, ids))
        _sequence(0, NOISE_STREAMS, purpose, ids)  # the same check of the name in every mode
        return SecureGenerator() if self.secure else np.random.default_rng()

    def seed(self, purpose: str, *ids: int) -> int | None:
        """A 63-bit seed for a torch generator of noise stream ``purpose``; None in the secure mode.

        Fresh entropy by default, derived from the insecure seed in that mode. torch's CPU generator keeps
        only 32 bits of a seed: use a fresh seed for CUDA generators only (as
        :func:`labeldp.dpsgd.noise.noise_generator` does).
        """
        if self.insecure_seed is not None:
            return int(_sequence(self.insecure_seed, NOISE_STREAMS, purpose, ids).generate_state(1, np.uint64)[0] >> 1)
        _sequence(0, NOISE_STREAMS, purpose, ids)
        return None if self.secure else fresh_seed()

    def key(self, purpose: str, *ids: int) -> bytes:
        """A 16-byte key for noise stream ``purpose`` that keyed draws (:mod:`labeldp.mechanisms.keyed`) are a
        pure function of: fresh OS entropy, held in memory by the caller and never written; derived from the
        insecure seed in that mode (reproducible, NOT PRIVATE)."""
        if self.insecure_seed is not None:
            return _sequence(self.insecure_seed, NOISE_STREAMS, purpose, ids).generate_state(2, np.uint64).tobytes()
        _sequence(0, NOISE_STREAMS, purpose, ids)
        return os.urandom(16)

    def describe(self) -> str:
        """Where the noise comes from, in a sentence for logs and summaries (saying so when it is not private)."""
        if self.insecure_seed is not None:
            return (
                f"reproducible from insecure_noise_seed {self.insecure_seed} in config.json: NOT PRIVATE, "
                "anyone who reads the configuration can regenerate the noise"
            )
        if self.secure:
            return "ChaCha20 keyed from OS entropy (cryptographically secure), never saved"
        return "generators seeded with fresh OS entropy, never saved"
