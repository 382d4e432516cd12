"""The embedded default dataset: scikit-learn's bundled 8x8 digits (no download needed)."""

from __future__ import annotations

import numpy as np
from sklearn.datasets import load_digits

from labeldp.data.dataset import LabeledDataset

#: Fixed split: 1347 training and 450 test images, always the same, chosen by position only (a split
#: that looked at the labels, e.g. a stratified one, would depend on private information).
TEST_SIZE = 450
SPLIT_SEED = 0


def load_digits_dataset() -> LabeledDataset:
    """scikit-learn's 1797 8x8 digits as (n, 1, 8, 8) images standardised to the training statistics: 1347
    training images with private labels, 450 test images with public ones, split by position only.
    """
    bunch = load_digits()
    images = (bunch.images / 16.0).astype(np.float32)[:, None, :, :]
    order = np.random.default_rng(SPLIT_SEED).permutation(len(images))
    test, train = order[:TEST_SIZE], order[TEST_SIZE:]
    x_train, x_test = images[train], images[test]
    mean, std = x_train.mean(), x_train.std()
    return LabeledDataset(
        "digits",
        (x_train - mean) / std,
        bunch.target[train],
        (x_test - mean) / std,
        bunch.target[test],
        num_classes=10,
        augmentation="none",
        class_names=[str(d) for d in range(10)],
    )
