"""Batch augmentations on tensors (vectorised over the batch, driven by an explicit generator)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from labeldp.data.dataset import AUGMENTATIONS
from labeldp.errors import ConfigError


def _draws(sample, batch: int, examples: torch.Tensor | None, population: int | None) -> torch.Tensor:
    """One random draw per image: ``sample(batch)``, or given dataset indices ``examples``, one per example of
    ``population`` taken at those indices, so an image's draw depends on its own index only.
    """
    if examples is None:
        return sample(batch)
    return sample(population)[examples]


def random_crop(
    images: torch.Tensor,
    padding: int,
    generator: torch.Generator,
    examples: torch.Tensor | None = None,
    population: int | None = None,
) -> torch.Tensor:
    """Zero-pad by ``padding`` and cut a random window of the original size from each (b, C, H, W) image.

    ``examples`` and ``population`` as in :func:`augment`.
    """
    batch, _, height, width = images.shape
    padded = F.pad(images, (padding,) * 4)
    dy = _draws(lambda n: torch.randint(0, 2 * padding + 1, (n,), generator=generator), batch, examples, population)
    dx = _draws(lambda n: torch.randint(0, 2 * padding + 1, (n,), generator=generator), batch, examples, population)
    rows = (dy[:, None] + torch.arange(height))[:, None, :, None]
    cols = (dx[:, None] + torch.arange(width))[:, None, None, :]
    index = torch.arange(batch)[:, None, None, None]
    channels = torch.arange(images.shape[1])[None, :, None, None]
    return padded[index, channels, rows, cols]


def random_flip(
    images: torch.Tensor,
    generator: torch.Generator,
    examples: torch.Tensor | None = None,
    population: int | None = None,
) -> torch.Tensor:
    """Mirror each (b, C, H, W) image left-right with probability 1/2 (``examples`` as in :func:`augment`)."""
    flip = _draws(lambda n: torch.rand(n, generator=generator), images.shape[0], examples, population) < 0.5
    return torch.where(flip[:, None, None, None], images.flip(-1), images)


def random_cutout(
    images: torch.Tensor,
    generator: torch.Generator,
    examples: torch.Tensor | None = None,
    population: int | None = None,
) -> torch.Tensor:
    """Blank a random square of each (b, C, H, W) image with probability 1/2 (cutout, DeVries and Taylor 2017).

    The square's side is 3/10 to 1/2 of the image's shorter one, its centre anywhere (so it may reach past an
    edge); blank is 0, the standardised images' mean. ``examples`` as in :func:`augment`.
    """
    batch, _, height, width = images.shape
    smallest = max(1, round(0.3 * min(height, width)))

    def uniform(high: int) -> torch.Tensor:
        return _draws(lambda n: torch.randint(0, high, (n,), generator=generator), batch, examples, population)

    half = (smallest + uniform(max(1, min(height, width) // 2 - smallest + 1))) // 2
    on = _draws(lambda n: torch.rand(n, generator=generator), batch, examples, population) < 0.5
    rows = (torch.arange(height) - uniform(height)[:, None]).abs() <= half[:, None]
    cols = (torch.arange(width) - uniform(width)[:, None]).abs() <= half[:, None]
    blank = on[:, None, None] & rows[:, :, None] & cols[:, None, :]
    return images.masked_fill(blank[:, None], 0.0)


def augment(
    images: torch.Tensor,
    policy: str,
    generator: torch.Generator,
    examples: torch.Tensor | None = None,
    population: int | None = None,
    flip: bool = False,
    cutout: bool = False,
) -> torch.Tensor:
    """Apply a dataset's augmentation ``policy``: ``none``, ``translate`` or ``crop-flip``; ``flip`` adds a
    left-right flip to a policy without one, ``cutout`` a blank square (:func:`random_cutout`) after it.

    ``translate`` is a random crop with padding 2, ``crop-flip`` one with padding 4 then a left-right
    flip; only 4-d (b, C, H, W) inputs are augmented. With ``examples`` (the images' indices in a dataset
    of ``population``) each image's augmentation depends on its own index and the generator only. DP-SGD
    needs that: its augmentation stream is public, and an image augmented by its position in a Poisson
    batch would change with another example's presence, which would then move more than its own clipped
    gradient.
    """
    if policy not in AUGMENTATIONS:
        raise ConfigError(f"unknown augmentation policy {policy!r}; choose one of {', '.join(AUGMENTATIONS)}")
    if images.dim() != 4:
        return images
    if policy != "none":
        images = random_crop(images, 4 if policy == "crop-flip" else 2, generator, examples, population)
    if flip or policy == "crop-flip":
        images = random_flip(images, generator, examples, population)
    return random_cutout(images, generator, examples, population) if cutout else images


def mixup(inputs: torch.Tensor, lam: float, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Mixup (Zhang et al. 2018): the mixed inputs ``lam x + (1 - lam) x[perm]``, and ``perm``.

    The loss is then ``lam * loss(targets) + (1 - lam) * loss(targets[perm])``.
    """
    perm = torch.randperm(inputs.shape[0], generator=generator)
    return lam * inputs + (1 - lam) * inputs[perm], perm
