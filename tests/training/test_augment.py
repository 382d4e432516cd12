"""Augmentations (training/augment.py): a random crop is a translation, mixup mixes with a
permutation, and an example's augmentation does not depend on its batch."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from labeldp.training.augment import augment, mixup, random_crop


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


def test_random_crop_is_a_translation() -> None:
    images = torch.arange(2 * 1 * 6 * 6, dtype=torch.float32).reshape(2, 1, 6, 6) + 1
    out = random_crop(images, 2, torch.Generator().manual_seed(0))
    assert out.shape == images.shape
    for i in range(2):
        found = False
        for dy in range(-2, 3):
            for dx in range(-2, 3):
                padded = F.pad(images[i, 0], (2, 2, 2, 2))
                shifted = padded[2 + dy : 8 + dy, 2 + dx : 8 + dx]
                found |= torch.equal(shifted, out[i, 0])
        assert found
    flipped = augment(images, "crop-flip", torch.Generator().manual_seed(1))
    assert flipped.shape == images.shape
    assert torch.equal(augment(images, "none", torch.Generator()), images)


def test_mixup_mixes_with_a_permutation() -> None:
    x = torch.eye(4)
    mixed, perm = mixup(x, 0.75, torch.Generator().manual_seed(0))
    assert torch.allclose(mixed, 0.75 * x + 0.25 * x[perm])
    assert sorted(perm.tolist()) == [0, 1, 2, 3]


def test_an_unknown_augmentation_is_refused_whatever_the_inputs() -> None:
    from labeldp.errors import ConfigError
    from labeldp.training.augment import augment

    generator = torch.Generator().manual_seed(0)
    for inputs in (torch.zeros(4, 10), torch.zeros(4, 1, 8, 8)):
        with pytest.raises(ConfigError, match="unknown augmentation policy 'flip'"):
            augment(inputs, "flip", generator)
    assert augment(torch.ones(4, 10), "translate", generator).equal(torch.ones(4, 10))  # a table: unchanged


def test_flip_mirrors_about_half_the_images_on_top_of_the_policy() -> None:
    images = torch.randn(400, 1, 6, 6)
    same_draws = augment(images, "translate", torch.Generator().manual_seed(2))
    assert torch.equal(augment(images, "translate", torch.Generator().manual_seed(2), flip=False), same_draws)
    mirrored = augment(images, "none", torch.Generator().manual_seed(2), flip=True)
    flipped = torch.tensor([torch.equal(m, i.flip(-1)) for m, i in zip(mirrored, images)])
    kept = torch.tensor([torch.equal(m, i) for m, i in zip(mirrored, images)])
    assert (flipped | kept).all() and 150 < int(flipped.sum()) < 250
    assert torch.equal(augment(images.reshape(400, 36), "none", torch.Generator(), flip=True), images.reshape(400, 36))


def test_cutout_blanks_one_square_of_about_half_the_images_after_the_policy() -> None:
    from labeldp.training.augment import random_cutout

    images = torch.randn(400, 2, 28, 28) + 10  # no pixel is 0 before
    same_draws = augment(images, "translate", torch.Generator().manual_seed(2), flip=True)
    assert torch.equal(
        augment(images, "translate", torch.Generator().manual_seed(2), flip=True, cutout=False), same_draws
    )
    cut = random_cutout(images, torch.Generator().manual_seed(4))
    blank = cut == 0
    assert torch.equal(blank[:, 0], blank[:, 1])  # every channel of the same square
    assert torch.equal(cut[~blank], images[~blank])
    touched = blank.flatten(1).any(dim=1)
    assert 150 < int(touched.sum()) < 250
    rows, cols = blank[:, 0].any(dim=2), blank[:, 0].any(dim=1)
    for r, c in zip(rows[touched], cols[touched]):  # one square of side 9 to 15, cut by the edges
        height, width = int(r.sum()), int(c.sum())
        assert 1 <= height <= 15 and 1 <= width <= 15
        assert torch.equal(r.nonzero().flatten(), torch.arange(int(r.nonzero()[0]), int(r.nonzero()[0]) + height))
    whole = [
        (int(r.sum()), int(c.sum())) for r, c in zip(rows, cols) if r.sum() and not (r[0] or r[-1] or c[0] or c[-1])
    ]
    assert {h for h, w in whole} == set(range(9, 16, 2)) and all(h == w for h, w in whole)
    alone = augment(images[[5]], "none", torch.Generator().manual_seed(3), torch.tensor([5]), 400, cutout=True)
    shared = augment(images[[1, 5]], "none", torch.Generator().manual_seed(3), torch.tensor([1, 5]), 400, cutout=True)
    assert torch.equal(alone[0], shared[1])  # an example's square depends on its own index only (DP-SGD)
