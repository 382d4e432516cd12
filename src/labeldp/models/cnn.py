"""A small convolutional network for 28x28 grey-scale images (MNIST family)."""

from __future__ import annotations

from torch import nn


class SmallCNN(nn.Sequential):
    """Two 5x5 conv blocks (16 and 32 channels, ReLU, 2x2 max-pool), a 256-unit hidden layer.

    Sized for CPUs: about 10 s per MNIST epoch on two cores, ~99.3 % test accuracy with clean labels.

    Uses no batch statistics, so the same network also works with per-example gradients (DP-SGD).
    """

    def __init__(self, in_channels: int = 1, num_classes: int = 10, image_size: int = 28,
                 channels: tuple[int, int] = (16, 32), hidden: int = 256):
        feature_size = image_size // 4
        super().__init__(
            nn.Conv2d(in_channels, channels[0], 5, padding=2), nn.ReLU(inplace=True), nn.MaxPool2d(2),
            nn.Conv2d(channels[0], channels[1], 5, padding=2), nn.ReLU(inplace=True), nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(channels[1] * feature_size * feature_size, hidden), nn.ReLU(inplace=True),
            nn.Linear(hidden, num_classes),
        )
