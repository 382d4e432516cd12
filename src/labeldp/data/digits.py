"""The embedded default dataset: scikit-learn's bundled 8x8 digits (no download needed)."""

from __future__ import annotations

import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

from labeldp.data.dataset import LabeledDataset

#: Fixed split: 1347 training and 450 test images, stratified, always the same.
TEST_SIZE = 0.25
SPLIT_SEED = 0


def load_digits_dataset() -> LabeledDataset:
    """1797 8x8 grey-scale digits, 10 classes, as (n, 1, 8, 8) images standardised to train statistics."""
    bunch = load_digits()
    images = (bunch.images / 16.0).astype(np.float32)[:, None, :, :]
    x_train, x_test, y_train, y_test = train_test_split(
        images, bunch.target, test_size=TEST_SIZE, random_state=SPLIT_SEED, stratify=bunch.target)
    mean, std = x_train.mean(), x_train.std()
    return LabeledDataset("digits", (x_train - mean) / std, y_train, (x_test - mean) / std, y_test,
                          num_classes=10, augmentation="none", class_names=[str(d) for d in range(10)])
