"""The models' names and the rule that picks one from the inputs' shape: no torch."""

from __future__ import annotations

MODELS = ("mlp", "cnn", "cnn-bn", "tanh-cnn", "resnet18", "wrn16-4", "recommender")


def default_model_name(input_shape: tuple[int, ...], categorical: tuple[int, ...] = ()) -> str:
    """The model used when none is named.

    The rule, from the input's shape: the recommender for tables with categorical columns; the small
    CNN (``"cnn"``) for 28x28 images; ResNet-18 for 32x32 images; else the MLP. The small CNN stays
    the 28x28 choice by measurement: non-private on MNIST with one thread it reached 99.60 % in 12
    epochs, and the batch-norm CNN (``"cnn-bn"``), 1.26x its cost per step, did not beat it per second
    of training (``benchmarks/image_networks.py``).

    Parameters
    ----------
    input_shape : tuple of int
        Shape of one input, without the batch dimension: (C, H, W) for images, (D,) for tables.
    categorical : tuple of int, optional
        Sizes of the leading integer-coded input columns (default none).

    Returns
    -------
    str
        One of :data:`MODELS`.
    """
    if categorical:
        return "recommender"
    if len(input_shape) == 3 and input_shape[1:] == (28, 28):
        return "cnn"
    if len(input_shape) == 3 and input_shape[1:] == (32, 32):
        return "resnet18"
    return "mlp"


__all__ = ["MODELS", "default_model_name"]
