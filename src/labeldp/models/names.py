"""The models' names and the rule that picks one from the inputs' shape: no torch."""

from __future__ import annotations

MODELS = ("mlp", "cnn", "cnn-bn", "convnet", "tanh-cnn", "resnet18", "wrn16-4", "recommender")


def default_model_name(
    input_shape: tuple[int, ...], categorical: tuple[int, ...] = (), per_example: bool = False
) -> str:
    """The model used when none is named.

    The rule, from the input's shape: the recommender for tables with categorical columns; for 28x28
    images the batch-norm ConvNet (``"convnet"``), or the small CNN (``"cnn"``) for a method that needs
    per-example gradients (DP-SGD, which refuses batch norm); for 32x32 images ResNet-18, or the
    wide ResNet ``"wrn16-4"`` for per-example gradients; else the MLP.

    The ConvNet is the 28x28 choice by non-private accuracy per second of training
    (``benchmarks/image_networks.py``, MNIST, one thread, 2 seeds): 6 epochs reached 99.63 and 99.53 %
    in 119 CPU seconds, 12 epochs 99.64 and 99.67 % in 215, the small CNN's 12 epochs 99.44 and
    99.55 % in 189; on MNIST's released labels (LP-2ST, five paired draws) it was 0.24 points ahead at
    epsilon 1 and 0.12 at epsilon 2 on average. No 32x32 data was at hand to measure a replacement for
    ResNet-18.

    Parameters
    ----------
    input_shape : tuple of int
        Shape of one input, without the batch dimension: (C, H, W) for images, (D,) for tables.
    categorical : tuple of int, optional
        Sizes of the leading integer-coded input columns (default none).
    per_example : bool, optional
        Whether the method trains on per-example gradients, so that the model must not mix the
        examples of a batch (default False).

    Returns
    -------
    str
        One of :data:`MODELS`.
    """
    if categorical:
        return "recommender"
    if len(input_shape) == 3 and input_shape[1:] == (28, 28):
        return "cnn" if per_example else "convnet"
    if len(input_shape) == 3 and input_shape[1:] == (32, 32):
        return "wrn16-4" if per_example else "resnet18"
    return "mlp"


__all__ = ["MODELS", "default_model_name"]
