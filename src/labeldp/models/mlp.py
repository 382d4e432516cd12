"""Multi-layer perceptron for tables and tiny images."""

from __future__ import annotations

import math

from torch import nn


class MLP(nn.Sequential):
    """Flatten, ``Linear -> ReLU`` blocks of widths ``hidden`` (with dropout after each when ``dropout`` > 0),
    a linear classifier.
    """

    def __init__(
        self, input_shape: tuple[int, ...], num_classes: int, hidden: tuple[int, ...] = (256, 256), dropout: float = 0.0
    ):
        layers: list[nn.Module] = [nn.Flatten()]
        width = math.prod(input_shape)
        for size in hidden:
            layers += [nn.Linear(width, size), nn.ReLU(inplace=True)]
            if dropout:
                layers.append(nn.Dropout(dropout))
            width = size
        layers.append(nn.Linear(width, num_classes))
        super().__init__(*layers)
