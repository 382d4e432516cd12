"""Gaussian noise for DP-SGD, and the private gradient: (clipped sum + noise) / expected batch size.

``generator`` is a seeded ``torch.Generator`` (reproducible, the default for experiments) or
``"secure"``: normal deviates from the operating system's CSPRNG (``os.urandom``) through the
Box-Muller transform in float64. torch's own generators are not cryptographic; an adversary who can
predict the noise removes it, so production training should use ``"secure"``. Like every
floating-point Gaussian sampler (Opacus's secure mode included) it is not an exact discrete
Gaussian; the accounting treats it as the ideal Gaussian.
"""

from __future__ import annotations

import math
from typing import Union

import torch
from torch import nn

from labeldp.randomness import SecureGenerator
from labeldp.training.dpsgd.clipping import ClippedGradients, trainable_parameters

NoiseSource = Union[torch.Generator, str, None]


def secure_normal(shape: torch.Size | tuple[int, ...], dtype: torch.dtype = torch.float32,
                  device: torch.device | str = "cpu") -> torch.Tensor:
    """Standard normal deviates from ``os.urandom``: the Box-Muller transform, in float64, of 53-bit
    uniforms (:meth:`SecureGenerator.random`), as :meth:`SecureGenerator.normal` does it, with torch's
    vectorised kernels (numpy's float64 ``cos`` and ``sin`` took most of the time)."""
    count = math.prod(shape)
    pairs = (count + 1) // 2
    uniforms = torch.from_numpy(SecureGenerator().random(2 * pairs))
    radius = torch.sqrt(-2.0 * torch.log1p(-uniforms[:pairs]))  # log(1 - u), u in [0, 1): finite
    angle = (2 * math.pi) * uniforms[pairs:]
    normals = torch.cat([radius * torch.cos(angle), radius * torch.sin(angle)])[:count]
    return normals.view(tuple(shape)).to(dtype=dtype, device=device)


def gaussian_noise(like: torch.Tensor, std: float, generator: NoiseSource = None) -> torch.Tensor:
    """N(0, std^2) noise shaped like ``like`` from ``generator`` (seeded torch generator or "secure")."""
    if generator == "secure":
        return secure_normal(like.shape, like.dtype, like.device) * std
    if isinstance(generator, str):
        raise ValueError(f"generator must be a torch.Generator, None or 'secure', got {generator!r}")
    return torch.randn(like.shape, generator=generator, dtype=like.dtype, device=like.device) * std


def privatize_gradients(model: nn.Module, clipped: ClippedGradients, noise_multiplier: float, max_grad_norm: float,
                        expected_batch_size: float, generator: NoiseSource = None) -> None:
    """Set ``p.grad`` of each trainable parameter to (clipped sum + N(0, (sigma C)^2)) / (q n).

    Dividing by the *expected* batch size q n (not the realised one, which depends on who was
    sampled) keeps the update a post-processing of the Gaussian mechanism. Call the optimiser's
    ``step()`` afterwards.
    """
    if not expected_batch_size > 0:
        raise ValueError(f"expected_batch_size must be > 0, got {expected_batch_size}")
    if noise_multiplier > 0 and math.isinf(max_grad_norm):
        raise ValueError("noise needs a finite clipping bound max_grad_norm")
    std = noise_multiplier * max_grad_norm if noise_multiplier > 0 else 0.0
    for param, total in zip(trainable_parameters(model), clipped.sums):
        noisy = total + gaussian_noise(total, std, generator) if std > 0 else total.clone()
        param.grad = noisy / expected_batch_size
