"""Gaussian noise for DP-SGD, and the private gradient: (clipped sum + noise) / expected batch size.

``generator`` is where the noise comes from, and it must be unpredictable to the adversary (who
could otherwise subtract it): ``None`` (the default) seeds a torch generator with fresh OS entropy
at every call, ``"secure"`` draws from the ChaCha20 CSPRNG
(:class:`~labeldp.randomness.SecureGenerator`, through the Box-Muller transform in float64), and a
seeded ``torch.Generator`` is reproducible and therefore only as private as its seed is secret.
:func:`noise_generator` builds one from a run's :class:`~labeldp.randomness.NoiseSource`. Like every
floating-point Gaussian sampler (Opacus's secure mode included) none is an exact discrete Gaussian;
the accounting treats the noise as the ideal Gaussian.
"""

from __future__ import annotations

import math
from typing import Union

import torch
from torch import nn

from labeldp.randomness import NoiseSource, SecureGenerator, box_muller, fresh_seed
from labeldp.dpsgd.clipping import ClippedGradients, trainable_parameters

NoiseGenerator = Union[torch.Generator, str, None]


def noise_generator(source: NoiseSource, purpose: str, *ids: int,
                    device: torch.device | str = "cpu") -> torch.Generator | str:
    """The generator of noise stream ``purpose`` under ``source``: ``"secure"``, or a torch
    generator on ``device`` seeded with fresh entropy (or, in the insecure mode, from its seed)."""
    seed = source.seed(purpose, *ids)
    return "secure" if seed is None else torch.Generator(device=device).manual_seed(seed)


def secure_normal(shape: torch.Size | tuple[int, ...], dtype: torch.dtype = torch.float32,
                  device: torch.device | str = "cpu") -> torch.Tensor:
    """Standard normal deviates from the ChaCha20 CSPRNG: :func:`~labeldp.randomness.box_muller` in
    float64 with torch's vectorised kernels (numpy's float64 cos and sin are several times slower)."""
    count = math.prod(shape)
    uniforms = torch.from_numpy(SecureGenerator().random(2 * ((count + 1) // 2)))
    return box_muller(uniforms, count, torch).view(tuple(shape)).to(dtype=dtype, device=device)


def gaussian_noise(like: torch.Tensor, std: float, generator: NoiseGenerator = None) -> torch.Tensor:
    """N(0, std^2) noise shaped like ``like`` from ``generator`` (see the module docstring)."""
    if generator == "secure":
        return secure_normal(like.shape, like.dtype, like.device) * std
    if isinstance(generator, str):
        raise ValueError(f"generator must be a torch.Generator, None or 'secure', got {generator!r}")
    if generator is None:
        generator = torch.Generator(device=like.device).manual_seed(fresh_seed())
    return torch.randn(like.shape, generator=generator, dtype=like.dtype, device=like.device) * std


def privatize_gradients(model: nn.Module, clipped: ClippedGradients, noise_multiplier: float, max_grad_norm: float,
                        expected_batch_size: float, generator: NoiseGenerator = None) -> None:
    """Set ``p.grad`` of each trainable parameter to (clipped sum + N(0, (sigma C)^2)) / (q n).

    Dividing by the *expected* batch size q n (not the realised one, which depends on who was
    sampled) keeps the update a post-processing of the Gaussian mechanism. Call the optimiser's
    ``step()`` afterwards. With ``generator=None`` one fresh generator serves all parameters.
    """
    if not expected_batch_size > 0:
        raise ValueError(f"expected_batch_size must be > 0, got {expected_batch_size}")
    if noise_multiplier > 0 and math.isinf(max_grad_norm):
        raise ValueError("noise needs a finite clipping bound max_grad_norm")
    std = noise_multiplier * max_grad_norm if noise_multiplier > 0 else 0.0
    params = trainable_parameters(model)
    if generator is None and params:
        generator = torch.Generator(device=params[0].device).manual_seed(fresh_seed())
    for param, total in zip(params, clipped.sums):
        noisy = total + gaussian_noise(total, std, generator) if std > 0 else total.clone()
        param.grad = noisy / expected_batch_size
