"""Multi-layer perceptron for tables and tiny images."""

from __future__ import annotations

import math

from torch import nn


class MLP(nn.Sequential):
    """Flatten, then ``Linear -> ReLU`` blocks, then a linear classifier.

    Maps inputs (B, *input_shape) to logits (B, num_classes).

    Parameters
    ----------
    input_shape : tuple of int
        Shape of one input, without the batch dimension; it is flattened.
    num_classes : int
        Number of outputs.
    hidden : tuple of int, optional
        Width of each hidden layer (default (256, 256)).
    dropout : float, optional
        Dropout probability after each hidden layer; 0 (the default) adds no dropout layer.
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
