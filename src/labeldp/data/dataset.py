"""The dataset container: public inputs, private training labels, a public test set."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from labeldp._validation import check_finite_features, check_labels, check_num_classes, check_same_length
from labeldp.errors import DataError

#: Augmentation policies the trainer knows: none, small translations (digits), crop+flip (CIFAR).
AUGMENTATIONS = ("none", "translate", "crop-flip")


@dataclass
class LabeledDataset:
    """Train/test arrays of one dataset.

    ``x_*`` are float32 arrays, (n, C, H, W) for images and (n, d) for tables, already normalised.
    ``y_train`` holds the *private* labels: only :mod:`labeldp.release` should read them.
    """

    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    num_classes: int
    augmentation: str = "none"
    class_names: list[str] = field(default_factory=list)
    preprocessor: Any = None  # the fitted encoding of raw rows into inputs (tables), public

    def __post_init__(self) -> None:
        self.num_classes = check_num_classes(self.num_classes)
        self.x_train = check_finite_features(self.x_train, "x_train").astype(np.float32, copy=False)
        self.x_test = check_finite_features(self.x_test, "x_test").astype(np.float32, copy=False)
        self.y_train = check_labels(self.y_train, self.num_classes, "y_train")
        self.y_test = check_labels(self.y_test, self.num_classes, "y_test")
        check_same_length(x_train=self.x_train, y_train=self.y_train)
        check_same_length(x_test=self.x_test, y_test=self.y_test)
        if self.x_train.shape[1:] != self.x_test.shape[1:]:
            raise DataError(f"x_train and x_test shapes differ: {self.x_train.shape[1:]} vs {self.x_test.shape[1:]}")
        if self.augmentation not in AUGMENTATIONS:
            raise DataError(f"augmentation must be one of {AUGMENTATIONS}, got {self.augmentation!r}")

    @property
    def input_shape(self) -> tuple[int, ...]:
        return tuple(self.x_train.shape[1:])

    def __repr__(self) -> str:
        return (f"LabeledDataset({self.name!r}, train={len(self.y_train)}, test={len(self.y_test)}, "
                f"input_shape={self.input_shape}, num_classes={self.num_classes})")


def standardize_images(train: np.ndarray, test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Scale uint8 (n, C, H, W) images to [0, 1] and standardise each channel with train statistics."""
    train = train.astype(np.float32) / 255.0
    test = test.astype(np.float32) / 255.0
    mean = train.mean(axis=(0, 2, 3), keepdims=True)
    std = train.std(axis=(0, 2, 3), keepdims=True) + 1e-6
    return (train - mean) / std, (test - mean) / std
