"""Batch augmentations on tensors (vectorised over the batch, driven by an explicit generator)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from labeldp.data.dataset import AUGMENTATIONS
from labeldp.errors import ConfigError


def _draws(sample, batch: int, examples: torch.Tensor | None, population: int | None) -> torch.Tensor:
    """One random draw per image: ``sample(count)`` for the batch, or, given the images' dataset indices
    ``examples`` among ``population`` examples, drawn for every example and taken at those indices, so
    that an image's draw depends on its own index only, not on which others share its batch."""
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
    """Zero-pad by ``padding`` and cut a random window of the original size from each image (per example
    of a population with ``examples`` and ``population``, see :func:`_draws`).

    Parameters
    ----------
    images : torch.Tensor
        (b, C, H, W) images.
    padding : int
        The zero padding on each side, and the largest shift in each direction.
    generator : torch.Generator
        The source of the shifts.
    examples : torch.Tensor or None, optional
        The images' indices in their dataset (default None: draws for the batch, in its order).
    population : int or None, optional
        The number of examples in the dataset, given with ``examples``: one draw is made for each and
        the images take those at their indices.

    Returns
    -------
    torch.Tensor
        (b, C, H, W) cropped images.
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
    """Mirror each image left-right with probability 1/2 (per example of a population with
    ``examples`` and ``population``, see :func:`_draws`).

    Parameters
    ----------
    images : torch.Tensor
        (b, C, H, W) images.
    generator : torch.Generator
        The source of the coin flips.
    examples : torch.Tensor or None, optional
        The images' indices in their dataset (default None: draws for the batch, in its order).
    population : int or None, optional
        The number of examples in the dataset, given with ``examples``: one draw is made for each and
        the images take those at their indices.

    Returns
    -------
    torch.Tensor
        (b, C, H, W) images, some mirrored.
    """
    flip = _draws(lambda n: torch.rand(n, generator=generator), images.shape[0], examples, population) < 0.5
    return torch.where(flip[:, None, None, None], images.flip(-1), images)


def augment(
    images: torch.Tensor,
    policy: str,
    generator: torch.Generator,
    examples: torch.Tensor | None = None,
    population: int | None = None,
) -> torch.Tensor:
    """Apply a dataset's augmentation ``policy``: ``none``, ``translate`` (+-2 px) or ``crop-flip``.

    With ``examples`` (the images' indices in a dataset of ``population`` examples) each image's
    augmentation depends on its own index and the generator only. DP-SGD needs that: its augmentation
    stream is public (from the seed), and an image augmented by its position in a Poisson batch would
    change with the presence of another example, so that example would move more than its own clipped
    gradient.

    Parameters
    ----------
    images : torch.Tensor
        The inputs; only 4-d (b, C, H, W) images are augmented, other inputs are returned as they are.
    policy : str
        ``"none"``, ``"translate"`` (a random crop with padding 2) or ``"crop-flip"`` (a random crop with
        padding 4, then a random left-right flip).
    generator : torch.Generator
        The source of the augmentation's draws.
    examples : torch.Tensor or None, optional
        The images' indices in their dataset (default None: draws for the batch, in its order).
    population : int or None, optional
        The number of examples in the dataset, given with ``examples``: one draw is made for each and
        the images take those at their indices.

    Returns
    -------
    torch.Tensor
        The augmented images (``images`` itself for ``"none"`` or inputs that are not 4-d).

    Raises
    ------
    labeldp.errors.ConfigError
        If ``policy`` is not one of the three, whatever the inputs.
    """
    if policy not in AUGMENTATIONS:
        raise ConfigError(f"unknown augmentation policy {policy!r}; choose one of {', '.join(AUGMENTATIONS)}")
    if policy == "none" or images.dim() != 4:
        return images
    if policy == "translate":
        return random_crop(images, 2, generator, examples, population)
    return random_flip(random_crop(images, 4, generator, examples, population), generator, examples, population)


def mixup(inputs: torch.Tensor, lam: float, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Mixup (Zhang et al. 2018): ``lam`` times each example plus ``1 - lam`` times a random partner.

    Returns the mixed inputs and the partner permutation; the loss is then
    ``lam * loss(targets) + (1 - lam) * loss(targets[perm])``. ``lam`` comes from Beta(alpha, alpha).

    Parameters
    ----------
    inputs : torch.Tensor
        (b, ...) inputs.
    lam : float
        The weight of each example, drawn by the caller.
    generator : torch.Generator
        The source of the partner permutation.

    Returns
    -------
    tuple of torch.Tensor
        The mixed inputs, shaped as ``inputs``, and the (b,) partner permutation.
    """
    perm = torch.randperm(inputs.shape[0], generator=generator)
    return lam * inputs + (1 - lam) * inputs[perm], perm
