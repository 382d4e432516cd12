"""The models' names and the rule that picks one from the inputs' shape: no torch."""

from __future__ import annotations

MODELS = ("mlp", "cnn", "cnn-bn", "convnet", "tanh-cnn", "resnet18", "wrn16-4", "recommender")


def default_model_name(
    input_shape: tuple[int, ...], categorical: tuple[int, ...] = (), per_example: bool = False
) -> str:
    """The model used when none is named, one of :data:`MODELS`, from the shape of one input.

    The recommender for tables with categorical columns; for 28x28 images the batch-norm ConvNet, or the
    small CNN when ``per_example`` (DP-SGD, which refuses batch norm); for 32x32 images ResNet-18, or
    ``"wrn16-4"`` when ``per_example``; else the MLP. Why these: docs/guides/images.md.

    Parameters
    ----------
    categorical : tuple of int, optional
        Sizes of the leading integer-coded input columns.
    per_example : bool, optional
        Whether the method needs per-example gradients, so the model must not mix a batch's examples.
    """
    if categorical:
        return "recommender"
    if len(input_shape) == 3 and input_shape[1:] == (28, 28):
        return "cnn" if per_example else "convnet"
    if len(input_shape) == 3 and input_shape[1:] == (32, 32):
        return "wrn16-4" if per_example else "resnet18"
    return "mlp"


__all__ = ["MODELS", "default_model_name"]
