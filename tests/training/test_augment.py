"""Augmentations (training/augment.py): a random crop is a translation, mixup mixes with a
permutation, and an example's augmentation does not depend on its batch."""

from __future__ import annotations

import torch


def test_an_examples_augmentation_does_not_depend_on_its_batch():
    """DP-SGD's augmentation stream is public (the seed): an example's view must be a function of its
    own index, or adding another example to a Poisson batch would change the others' gradients too."""
    from labeldp.training.augment import augment

    images = torch.randn(10, 3, 8, 8)

    def views(indices: list[int]) -> torch.Tensor:
        generator = torch.Generator().manual_seed(3)
        return augment(images[indices], "crop-flip", generator, torch.tensor(indices), len(images))

    alone, shared = views([5]), views([1, 5, 7])
    assert torch.equal(alone[0], shared[1])
    assert not all(torch.equal(views([i])[0], images[i]) for i in range(10))  # it does augment
