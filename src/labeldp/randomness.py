"""Randomness: private noise that nothing saved can reproduce, and public streams named by purpose.

labeldp keeps two kinds of draws apart.

**Noise** is what the privacy guarantee rests on: the coin flips of randomized response and
RR-with-prior, histogram and Laplace noise, PATE's vote noise, DP-SGD's Poisson sampling and gradient
noise. An attacker who could regenerate it would subtract it and read the true labels, so a
:class:`NoiseSource` never derives it from anything a run writes down:

- by default (``NoiseSource()``) the label releases draw from numpy's PCG64 seeded with 128 bits of
  fresh operating-system entropy, and DP-SGD from ChaCha20 (below) on the CPU, whose torch
  generator keeps only 32 bits of a seed, or from a CUDA generator seeded with 63 fresh bits. None
  of it is ever written or printed. This protects against everyone who reads what labeldp saves or
  shows (run folders, configs, logs, checkpoints). PCG64 and CUDA's Philox are not cryptographic: an
  attacker able to recover their state from raw outputs could predict later draws, which is what
  the next option excludes;
- ``NoiseSource(secure=True)`` (``--secure-rng``) draws everything from :class:`SecureGenerator`, the
  ChaCha20 stream cipher keyed with 256 bits of operating-system entropy: a cryptographically secure
  generator, as unpredictable as the OS's own, and faster than numpy's PCG64 for uniforms;
- ``NoiseSource(insecure_seed=S)`` (``--insecure-noise-seed``) derives every draw from S, so a run
  can be repeated exactly. It is **not private**: S is written to the run's ``config.json``, and
  anyone who reads it regenerates the noise. It exists for tests and debugging, and a run made with
  it says so.

**Public streams** control everything that depends on no label: splits, initialisation, data
order, augmentation, k-means. They come from the user's ``--seed`` through :func:`public_rng` and
:func:`public_seed`, each named by its purpose, so a run is reproducible from its configuration
and its saved releases: a resumed run reads its noisy labels back instead of redrawing them.

Library functions take ``rng``: ``None`` (fresh entropy, the default), ``"secure"`` or a
:class:`SecureGenerator`, a ``numpy.random.Generator``, or an integer seed (reproducible, hence not
private: for tests and experiments whose noise may be known).
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
    """The reproducible generator of public stream ``purpose`` (a key of :data:`PUBLIC_STREAMS`).

    Public streams control only what depends on no label; they are not noise.

    Parameters
    ----------
    seed : int
        The run's public seed (``--seed``).
    purpose : str
        A key of :data:`PUBLIC_STREAMS`.
    *ids : int
        Further identifiers of the stream (e.g. a fold or an epoch).

    Returns
    -------
    numpy.random.Generator
        A generator seeded from ``SeedSequence([seed, number, *ids])``.

    Raises
    ------
    labeldp.errors.ConfigError
        If ``purpose`` is not a public stream.
    """
    return np.random.default_rng(_sequence(seed, PUBLIC_STREAMS, purpose, ids))


def public_seed(seed: int, purpose: str, *ids: int) -> int:
    """A 63-bit integer seed of public stream ``purpose``, for ``torch.Generator.manual_seed``.

    Parameters
    ----------
    seed : int
        The run's public seed (``--seed``).
    purpose : str
        A key of :data:`PUBLIC_STREAMS`.
    *ids : int
        Further identifiers of the stream.

    Returns
    -------
    int
        A seed in [0, 2^63).

    Raises
    ------
    labeldp.errors.ConfigError
        If ``purpose`` is not a public stream.
    """
    return int(_sequence(seed, PUBLIC_STREAMS, purpose, ids).generate_state(1, np.uint64)[0] >> np.uint64(1))


def box_muller(radius_uniforms, angle_uniforms, count: int, xp: Any = np):
    """Standard normal deviates from uniforms: the Box-Muller transform.

    ``count`` standard normal deviates from ``ceil(count / 2)`` uniforms in [0, 1) for the radii and
    as many for the angles. The radius uniforms set the tails: on the 2^-53 grid (float64) no deviate
    is cut off before 8.57 standard deviations (5.77 on float32's 2^-24 grid); the angles only need the
    precision of the result. ``xp`` is the array module (numpy, or torch for tensors: torch's
    vectorised cos and sin are several times faster than numpy's). Like every floating-point Gaussian
    sampler it is not an exact discrete Gaussian.

    Parameters
    ----------
    radius_uniforms : numpy.ndarray or torch.Tensor
        ``ceil(count / 2)`` uniforms in [0, 1), 1-d.
    angle_uniforms : numpy.ndarray or torch.Tensor
        As many uniforms in [0, 1), 1-d; their dtype is the result's.
    count : int
        Number of deviates.
    xp : module, optional
        ``numpy`` (default) or ``torch``.

    Returns
    -------
    numpy.ndarray or torch.Tensor
        ``count`` deviates, 1-d, in the dtype of ``angle_uniforms``.
    """
    radius = xp.sqrt(-2.0 * xp.log1p(-radius_uniforms))  # log(1 - u) with u in [0, 1): finite
    angle = (2 * math.pi) * angle_uniforms
    radius = radius.astype(angle.dtype) if xp is np else radius.to(angle.dtype)  # the result's precision
    return xp.concatenate([radius * xp.cos(angle), radius * xp.sin(angle)])[:count]


class SecureGenerator:
    """A cryptographically secure generator with the part of ``numpy.random.Generator``'s interface that labeldp uses.

    64-bit words from the ChaCha20 keystream (the ``cryptography`` package, i.e. OpenSSL), under a key
    and nonce of 384 bits from ``os.urandom`` drawn when it is created.

    ``random`` gives floats on the 2^-53 grid of [0, 1) (the top 53 bits of a word); ``integers`` is
    exactly uniform (rejection sampling on words, no modulo bias); ``normal`` is :func:`box_muller`
    in float64. On the 2-core development machine the keystream runs at about 5 GB/s, 13 times the
    speed of reading ``os.urandom``.

    The constructor takes no parameters; nothing of the key is ever saved.

    Attributes
    ----------
    None
        It has no public attributes: the keystream it draws from is held privately.
    """

    def __init__(self) -> None:
        self._stream = Cipher(algorithms.ChaCha20(os.urandom(32), os.urandom(16)), mode=None).encryptor()

    def words(self, count: int) -> np.ndarray:
        """``count`` uniformly random 64-bit words.

        Parameters
        ----------
        count : int
            Number of words.

        Returns
        -------
        numpy.ndarray
            uint64 array of shape (count,).
        """
        return np.frombuffer(self._stream.update(bytes(8 * count)), dtype=np.uint64)

    def random(self, size: int | tuple[int, ...] | None = None) -> np.ndarray | float:
        """Uniform floats on the 2^-53 grid of [0, 1) (numpy's signature).

        Parameters
        ----------
        size : int, tuple of int or None, optional
            Shape of the result; None (default) for one float.

        Returns
        -------
        numpy.ndarray or float
            float64 values of shape ``size``, or a float.
        """
        shape = () if size is None else size
        values = (self.words(int(np.prod(shape))) >> np.uint64(11)).astype(np.float64) * 2.0**-53
        return float(values[0]) if size is None else values.reshape(shape)

    def normal(
        self, loc: float = 0.0, scale: float = 1.0, size: int | tuple[int, ...] | None = None
    ) -> np.ndarray | float:
        """Normal deviates N(loc, scale^2) (numpy's signature).

        Parameters
        ----------
        loc : float, optional
            Mean (default 0).
        scale : float, optional
            Standard deviation (default 1).
        size : int, tuple of int or None, optional
            Shape of the result; None (default) for one float.

        Returns
        -------
        numpy.ndarray or float
            float64 deviates of shape ``size``, or a float.
        """
        shape = () if size is None else ((size,) if np.isscalar(size) else tuple(size))
        count = int(np.prod(shape))
        pairs = (count + 1) // 2
        values = loc + scale * box_muller(self.random(pairs), self.random(pairs), count)
        return float(values[0]) if size is None else values.reshape(shape)

    def integers(self, low, high=None, size=None) -> np.ndarray:
        """Uniform integers in [low, high) (numpy's convention: one argument means [0, low)).

        Parameters
        ----------
        low : int or array_like of int
            Lowest value (or, without ``high``, the exclusive upper bound).
        high : int or array_like of int, optional
            Exclusive upper bound, broadcast against ``low``.
        size : int, tuple of int or None, optional
            Shape of the result; None for the broadcast shape of ``low`` and ``high``.

        Returns
        -------
        numpy.ndarray
            int64 array.

        Raises
        ------
        labeldp.errors.ConfigError
            If some ``high`` is not greater than its ``low``.
        """
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
    """Turn any accepted ``rng`` argument into an object with ``random``, ``integers`` and ``normal``.

    None -> fresh OS entropy, ``"secure"`` -> a new :class:`SecureGenerator`, an int -> a seeded
    (reproducible, not private) generator; generators are used as they are.

    Parameters
    ----------
    rng : None, int, str, numpy.random.Generator or SecureGenerator
        The source.

    Returns
    -------
    numpy.random.Generator or SecureGenerator
        The generator.

    Raises
    ------
    labeldp.errors.ConfigError
        If ``rng`` is none of the accepted kinds (a string other than ``"secure"``, a bool, ...).
    """
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
    """63 bits of operating-system entropy, for a torch generator that must be unpredictable.

    Returns
    -------
    int
        A seed in [0, 2^63).
    """
    return int.from_bytes(os.urandom(8), "little") >> 1


@dataclass(frozen=True)
class NoiseSource:
    """Where a run's noise comes from (see the module docstring).

    Fresh OS entropy by default, ChaCha20 with ``secure``, or an explicitly insecure, reproducible
    seed.

    Parameters
    ----------
    secure : bool, optional
        Draw everything from :class:`SecureGenerator` (default False).
    insecure_seed : int or None, optional
        Derive every draw from this seed: reproducible and **not private** (default None).

    Attributes
    ----------
    secure : bool
        Whether the noise comes from ChaCha20.
    insecure_seed : int or None
        The insecure seed, if any.
    private : bool
        False when the noise can be regenerated from the run's configuration.

    Raises
    ------
    labeldp.errors.ConfigError
        If both ``secure`` and ``insecure_seed`` are given.
    """

    secure: bool = False
    insecure_seed: int | None = None

    def __post_init__(self) -> None:
        if self.secure and self.insecure_seed is not None:
            raise ConfigError("the noise is either secure or reproducible from a seed, not both")

    @property
    def private(self) -> bool:
        """False when the noise can be regenerated from the run's configuration.

        Returns
        -------
        bool
            True unless an insecure seed is set.
        """
        return self.insecure_seed is None

    def generator(self, purpose: str, *ids: int) -> np.random.Generator | SecureGenerator:
        """A generator for noise stream ``purpose`` (a key of :data:`NOISE_STREAMS`).

        Parameters
        ----------
        purpose : str
            A key of :data:`NOISE_STREAMS`.
        *ids : int
            Further identifiers of the stream.

        Returns
        -------
        numpy.random.Generator or SecureGenerator
            Seeded from the insecure seed in that mode; otherwise a :class:`SecureGenerator` (``secure``)
            or a generator seeded with fresh OS entropy.

        Raises
        ------
        labeldp.errors.ConfigError
            If ``purpose`` is not a noise stream (checked in every mode).
        """
        if self.insecure_seed is not None:
            return np.random.default_rng(_sequence(self.insecure_seed, NOISE_STREAMS, purpose, ids))
        _sequence(0, NOISE_STREAMS, purpose, ids)  # the same check of the name in every mode
        return SecureGenerator() if self.secure else np.random.default_rng()

    def seed(self, purpose: str, *ids: int) -> int | None:
        """A 63-bit seed for a torch generator of noise stream ``purpose``.

        Fresh entropy by default, derived from the insecure seed in that mode; None when the noise must come
        from a :class:`SecureGenerator`. (torch's CPU generator keeps only the low 32 bits of a seed: use a
        fresh seed only for CUDA generators, :func:`labeldp.dpsgd.noise.noise_generator` does.)

        Parameters
        ----------
        purpose : str
            A key of :data:`NOISE_STREAMS`.
        *ids : int
            Further identifiers of the stream.

        Returns
        -------
        int or None
            A seed in [0, 2^63), or None in the secure mode.

        Raises
        ------
        labeldp.errors.ConfigError
            If ``purpose`` is not a noise stream.
        """
        if self.insecure_seed is not None:
            return int(_sequence(self.insecure_seed, NOISE_STREAMS, purpose, ids).generate_state(1, np.uint64)[0] >> 1)
        _sequence(0, NOISE_STREAMS, purpose, ids)
        return None if self.secure else fresh_seed()

    def describe(self) -> str:
        """Where the noise comes from, in words, for logs and summaries.

        Returns
        -------
        str
            A sentence; in the insecure mode it says the noise is not private.
        """
        if self.insecure_seed is not None:
            return (
                f"reproducible from insecure_noise_seed {self.insecure_seed} in config.json: NOT PRIVATE, "
                "anyone who reads the configuration can regenerate the noise"
            )
        if self.secure:
            return "ChaCha20 keyed from OS entropy (cryptographically secure), never saved"
        return "generators seeded with fresh OS entropy, never saved"
