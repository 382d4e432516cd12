"""Batch augmentations on tensors (vectorised over the batch, driven by an explicit generator)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from labeldp.errors import ConfigError


def random_crop(images: torch.Tensor, padding: int, generator: torch.Generator) -> torch.Tensor:
    """Zero-pad by ``padding`` and cut a random window of the original size from each image."""
    batch, _, height, width = images.shape
    padded = F.pad(images, (padding,) * 4)
    dy = torch.randint(0, 2 * padding + 1, (batch,), generator=generator)
    dx = torch.randint(0, 2 * padding + 1, (batch,), generator=generator)
    rows = (dy[:, None] + torch.arange(height))[:, None, :, None]
    cols = (dx[:, None] + torch.arange(width))[:, None, None, :]
    index = torch.arange(batch)[:, None, None, None]
    channels = torch.arange(images.shape[1])[None, :, None, None]
    return padded[index, channels, rows, cols]


def random_flip(images: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Mirror each image left-right with probability 1/2."""
    flip = torch.rand(images.shape[0], generator=generator) < 0.5
    return torch.where(flip[:, None, None, None], images.flip(-1), images)


def augment(images: torch.Tensor, policy: str, generator: torch.Generator) -> torch.Tensor:
    """Apply a dataset's augmentation ``policy``: ``none``, ``translate`` (+-2 px) or ``crop-flip``."""
    if policy == "none" or images.dim() != 4:
        return images
    if policy == "translate":
        return random_crop(images, 2, generator)
    if policy == "crop-flip":
        return random_flip(random_crop(images, 4, generator), generator)
    raise ConfigError(f"unknown augmentation policy {policy!r}")


def mixup(inputs: torch.Tensor, lam: float, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Mixup (Zhang et al. 2018): ``lam`` times each example plus ``1 - lam`` times a random partner.

    Returns the mixed inputs and the partner permutation; the loss is then
    ``lam * loss(targets) + (1 - lam) * loss(targets[perm])``. ``lam`` comes from Beta(alpha, alpha).
    """
    perm = torch.randperm(inputs.shape[0], generator=generator)
    return lam * inputs + (1 - lam) * inputs[perm], perm
