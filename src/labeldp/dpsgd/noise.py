"""Gaussian noise for DP-SGD, and the private gradient: (clipped sum + noise) / expected batch size.

``generator`` is where the noise comes from, and it must be unpredictable to the adversary (who
could otherwise subtract it):

- ``"secure"``: the ChaCha20 CSPRNG (:class:`~labeldp.randomness.SecureGenerator`) through the
  Box-Muller transform in float64. The default on the CPU (``None``), where it is also the fastest
  float64 sampler: torch's CPU generator (Mersenne Twister) keeps only 32 bits of its seed, few
  enough to search, so it is not an unpredictable source however it is seeded.
- a ``torch.Generator``: torch's sampler, in float64, cast to the gradients' type. On a CUDA device,
  seeded with 63 bits of fresh OS entropy, the default there (``None``); seeded from a number, it is
  reproducible and only as private as that number is secret.

Every deviate comes from 53-bit uniforms, so none is cut off before 8.57 standard deviations: float32
sampling (24-bit uniforms) stops at 5.77, which a union bound over DP-SGD's steps turns into a
delta of about 1e-4, ten times the usual target. Like every floating-point Gaussian sampler (Opacus's
secure mode included) none is an exact discrete Gaussian; the accounting treats the noise as the
ideal Gaussian. :func:`noise_generator` chooses for a run's :class:`~labeldp.randomness.NoiseSource`.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from labeldp.dpsgd.clipping import ClippedGradients, trainable_parameters
from labeldp.errors import ConfigError
from labeldp.randomness import NoiseSource, SecureGenerator, box_muller, fresh_seed

NoiseGenerator = torch.Generator | str | None


def noise_generator(
    source: NoiseSource, purpose: str, *ids: int, device: torch.device | str = "cpu"
) -> torch.Generator | str:
    """The generator of noise stream ``purpose`` under ``source``.

    In the insecure mode a torch generator on ``device`` seeded from it; otherwise ``"secure"`` on the
    CPU or when asked, and a generator seeded with fresh entropy on a CUDA device.

    Parameters
    ----------
    source : labeldp.randomness.NoiseSource
        The run's noise source.
    purpose : str
        A key of :data:`labeldp.randomness.NOISE_STREAMS` (e.g. ``"dpsgd-noise"``).
    *ids : int
        Further identifiers of the stream (e.g. a step).
    device : torch.device or str, optional
        The device the noise is drawn on (default ``"cpu"``).

    Returns
    -------
    torch.Generator or str
        A generator, or ``"secure"`` for :func:`secure_normal`.

    Raises
    ------
    labeldp.errors.ConfigError
        If ``purpose`` is not a noise stream.
    """
    seed = source.seed(purpose, *ids)
    if source.private and (seed is None or torch.device(device).type == "cpu"):
        return "secure"
    return torch.Generator(device=device).manual_seed(seed)


def secure_normal(
    shape: torch.Size | tuple[int, ...], dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu"
) -> torch.Tensor:
    """Standard normal deviates from the ChaCha20 CSPRNG.

    :func:`~labeldp.randomness.box_muller` with torch's vectorised kernels, the radii from 53-bit
    uniforms (the tails), the angles from 24-bit uniforms in float32 (53-bit ones for ``dtype``
    float64). A new :class:`~labeldp.randomness.SecureGenerator` is keyed for every call.

    Parameters
    ----------
    shape : torch.Size or tuple of int
        Shape of the result.
    dtype : torch.dtype, optional
        Dtype of the result (default ``torch.float32``).
    device : torch.device or str, optional
        Device of the result (default ``"cpu"``; the deviates are drawn on the CPU and moved).

    Returns
    -------
    torch.Tensor
        Deviates of the given shape, dtype and device.
    """
    count = math.prod(shape)
    pairs = (count + 1) // 2
    generator = SecureGenerator()
    radius = torch.from_numpy(generator.random(pairs))
    if dtype == torch.float64:
        angle = torch.from_numpy(generator.random(pairs))
    else:
        angle = torch.from_numpy((generator.words(pairs) >> np.uint64(40)).astype(np.float32)) * 2.0**-24
    return box_muller(radius, angle, count, torch).view(tuple(shape)).to(dtype=dtype, device=device)


def gaussian_noise(like: torch.Tensor, std: float, generator: NoiseGenerator = None) -> torch.Tensor:
    """N(0, std^2) noise shaped like ``like`` from ``generator`` (see the module docstring).

    Parameters
    ----------
    like : torch.Tensor
        The tensor whose shape, dtype and device the noise takes.
    std : float
        Standard deviation.
    generator : torch.Generator, str or None, optional
        ``"secure"``, a ``torch.Generator`` (sampled in float64, then cast), or None for a fresh
        source (ChaCha20 on the CPU, a generator seeded with fresh entropy elsewhere).

    Returns
    -------
    torch.Tensor
        Noise like ``like``.

    Raises
    ------
    labeldp.errors.ConfigError
        If ``generator`` is a string other than ``"secure"``.
    """
    if generator == "secure":
        return secure_normal(like.shape, like.dtype, like.device) * std
    if isinstance(generator, str):
        raise ConfigError(f"generator must be a torch.Generator, None or 'secure', got {generator!r}")
    if generator is None:
        return gaussian_noise(like, std, _fresh_generator(like.device))
    return (torch.randn(like.shape, generator=generator, dtype=torch.float64, device=like.device) * std).to(like.dtype)


def _fresh_generator(device: torch.device) -> torch.Generator | str:
    """The default: ChaCha20 on the CPU, a generator seeded with fresh entropy on other devices."""
    return "secure" if device.type == "cpu" else torch.Generator(device=device).manual_seed(fresh_seed())


def privatize_gradients(
    model: nn.Module,
    clipped: ClippedGradients,
    noise_multiplier: float,
    max_grad_norm: float,
    expected_batch_size: float,
    generator: NoiseGenerator = None,
) -> None:
    """Set ``p.grad`` of each trainable parameter to (clipped sum + N(0, (sigma C)^2)) / (q n).

    Dividing by the *expected* batch size q n (not the realised one, which depends on who was
    sampled) keeps the update a post-processing of the Gaussian mechanism. Call the optimiser's
    ``step()`` afterwards. With ``generator=None`` one fresh source serves all parameters.

    With each example's share of the sum clipped to norm C (:func:`~labeldp.dpsgd.clipping.clipped_gradient_sum`),
    the noisy sum is a Gaussian mechanism with noise multiplier sigma under add-or-remove-one-example
    neighbours, as :func:`~labeldp.accounting.events.dpsgd_event` accounts it, provided the batch was
    Poisson-sampled in secret and the noise is unpredictable to the adversary (see the module
    docstring).

    Parameters
    ----------
    model : torch.nn.Module
        The model whose trainable parameters get gradients.
    clipped : labeldp.dpsgd.clipping.ClippedGradients
        The clipped sums, one per trainable parameter in ``model.parameters()`` order.
    noise_multiplier : float
        sigma, the ratio of the noise's standard deviation to C (0: no noise, no privacy).
    max_grad_norm : float
        The clipping bound C the sums were clipped to.
    expected_batch_size : float
        q n, > 0.
    generator : torch.Generator, str or None, optional
        Source of the noise (see :func:`gaussian_noise`).

    Returns
    -------
    None

    Raises
    ------
    labeldp.errors.ConfigError
        If ``expected_batch_size`` is not > 0, noise is asked with an infinite ``max_grad_norm``, or
        ``generator`` is a string other than ``"secure"``.
    """
    if not expected_batch_size > 0:
        raise ConfigError(f"expected_batch_size must be > 0, got {expected_batch_size}")
    if noise_multiplier > 0 and math.isinf(max_grad_norm):
        raise ConfigError("noise needs a finite clipping bound max_grad_norm")
    std = noise_multiplier * max_grad_norm if noise_multiplier > 0 else 0.0
    params = trainable_parameters(model)
    if generator is None and params:
        generator = _fresh_generator(params[0].device)
    for param, total in zip(params, clipped.sums):
        noisy = total + gaussian_noise(total, std, generator) if std > 0 else total.clone()
        param.grad = noisy / expected_batch_size
