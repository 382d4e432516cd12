"""The models' names and the rule that picks one from the inputs' shape: no torch."""

from __future__ import annotations

MODELS = ("mlp", "cnn", "tanh-cnn", "resnet18", "wrn16-4", "recommender")


def default_model_name(input_shape: tuple[int, ...], categorical: tuple[int, ...] = ()) -> str:
    """The model used when none is named.

    The recommender for tables with categorical columns, CNN for 28x28 images, ResNet-18 for 32x32,
    else MLP.

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
