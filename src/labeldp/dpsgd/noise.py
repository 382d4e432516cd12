"""Gaussian noise for DP-SGD, and the private gradient: (clipped sum + noise) / expected batch size.

The noise must be unpredictable to the adversary, who could otherwise subtract it. ``"secure"`` is
ChaCha20 (:class:`~labeldp.randomness.SecureGenerator`) through Box-Muller in float64, the default on
the CPU: torch's CPU generator keeps only 32 bits of its seed. A ``torch.Generator`` samples in
float64 and casts; on CUDA it is seeded with fresh entropy by default, and seeded from a number it is
only as private as that number. Every deviate comes from 53-bit uniforms, so none is cut off before
8.57 standard deviations (docs/threat-model.md says why float32 sampling would not do); the
accounting treats the noise as the ideal Gaussian.
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
    """The generator of noise stream ``purpose`` under ``source``: ``"secure"``, or a torch generator on ``device``.

    A torch generator seeded from ``source`` when it is insecure, one seeded with fresh entropy on a CUDA
    device; ``"secure"`` otherwise.
    """
    seed = source.seed(purpose, *ids)  # None only for a secure source, a private one
    if seed is None or (source.private and torch.device(device).type == "cpu"):
        return "secure"
    return torch.Generator(device=device).manual_seed(seed)


def secure_normal(
    shape: torch.Size | tuple[int, ...], dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu"
) -> torch.Tensor:
    """Standard normal deviates from the ChaCha20 CSPRNG, a new one keyed for every call.

    :func:`~labeldp.randomness.box_muller`: radii from 53-bit uniforms (the tails), angles from 24-bit
    uniforms in float32 (53-bit for float64). Drawn on the CPU and moved to ``device``.
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
    """N(0, std^2) noise shaped like ``like``, from ``generator``.

    ``"secure"``, a torch generator (float64, then cast), or None for a fresh source.
    """
    if generator == "secure":
        return secure_normal(like.shape, like.dtype, like.device) * std
    if isinstance(generator, str):
        raise ConfigError(f"generator must be a torch.Generator, None or 'secure', got {generator!r}")
    if generator is None:
        return gaussian_noise(like, std, _fresh_generator(like.device))
    return (torch.randn(like.shape, generator=generator, dtype=torch.float64, device=like.device) * std).to(like.dtype)


def _fresh_generator(device: torch.device) -> torch.Generator | str:
    """The default: ChaCha20 on the CPU, a generator seeded with fresh entropy elsewhere."""
    return "secure" if device.type == "cpu" else torch.Generator(device=device).manual_seed(fresh_seed())


def privatize_gradients(
    model: nn.Module,
    clipped: ClippedGradients,
    noise_multiplier: float,
    max_grad_norm: float,
    expected_batch_size: float,
    generator: NoiseGenerator = None,
) -> None:
    """Set each trainable parameter's ``grad`` to (clipped sum + N(0, (sigma C)^2)) / (q n); then call ``step()``.

    With each example's share of the sum clipped to norm C
    (:func:`~labeldp.dpsgd.clipping.clipped_gradient_sum`), the noisy sum is a Gaussian mechanism of
    noise multiplier sigma under add-or-remove-one-example, as
    :func:`~labeldp.accounting.events.dpsgd_event` accounts it, provided the batch was Poisson-sampled in
    secret and the noise is unpredictable. Dividing by the *expected* batch size q n, not the realised
    one, keeps the update post-processing. ``generator=None``: one fresh source for all parameters.
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
