"""Building a model by name (:data:`labeldp.models.names.MODELS`)."""

from __future__ import annotations

import torch
from torch import nn

from labeldp.errors import ConfigError
from labeldp.models.boosted_trees import BoostedTrees
from labeldp.models.cnn import BatchNormCNN, SmallCNN, TanhCNN
from labeldp.models.convnet import ConvNet
from labeldp.models.mlp import MLP
from labeldp.models.names import MODELS, default_model_name
from labeldp.models.recommender import RecommenderMLP
from labeldp.models.resnet import ResNet18
from labeldp.models.wideresnet import WideResNet


def build_model(
    name: str | None,
    input_shape: tuple[int, ...],
    num_classes: int,
    seed: int | None = None,
    categorical: tuple[int, ...] = (),
) -> nn.Module:
    """Build model ``name`` (None: :func:`default_model_name`'s choice) on the CPU.

    ``categorical`` are the sizes of the leading integer-coded input columns
    (:attr:`labeldp.data.LabeledDataset.categorical`). With ``seed`` the initial weights come from it and
    torch's global random state is left as it was.

    Raises
    ------
    labeldp.errors.ConfigError
        If ``name`` is unknown or does not fit ``input_shape`` (e.g. ``"cnn"`` needs square images with a
        side divisible by 4, ``"recommender"`` a table with categorical columns).
    """
    name = name or default_model_name(input_shape, categorical)
    if seed is None:
        return _build(name, input_shape, num_classes, tuple(categorical))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return _build(name, input_shape, num_classes, tuple(categorical))


def _build(name: str, input_shape: tuple[int, ...], num_classes: int, categorical: tuple[int, ...]) -> nn.Module:
    if name == "recommender":
        if len(input_shape) != 1 or not categorical:
            raise ConfigError(
                f"model 'recommender' needs a table whose leading columns are categorical codes "
                f"(e.g. movielens), got inputs of shape {input_shape}"
            )
        return RecommenderMLP(categorical, input_shape[0] - len(categorical), num_classes)
    if name == "mlp":
        return MLP(input_shape, num_classes)
    if name == "gbdt":
        if len(input_shape) != 1:
            raise ConfigError(f"model 'gbdt' needs a table's encoded rows, got inputs of shape {input_shape}")
        return BoostedTrees(num_classes)
    if name in ("cnn", "cnn-bn"):
        if len(input_shape) != 3 or input_shape[1] != input_shape[2] or input_shape[1] % 4:
            raise ConfigError(f"model {name!r} needs square images with side divisible by 4, got {input_shape}")
        return (SmallCNN if name == "cnn" else BatchNormCNN)(input_shape[0], num_classes, input_shape[1])
    if name == "convnet":
        if len(input_shape) != 3 or min(input_shape[1:]) < 17:
            raise ConfigError(f"model 'convnet' needs images (C, H, W) of at least 17x17, got {input_shape}")
        return ConvNet(input_shape[0], num_classes)
    if name == "tanh-cnn":
        if len(input_shape) != 3 or input_shape[1:] != (28, 28):
            raise ConfigError(f"model 'tanh-cnn' needs 28x28 images, got {input_shape}")
        return TanhCNN(input_shape[0], num_classes)
    if name == "resnet18":
        if len(input_shape) != 3:
            raise ConfigError(f"model 'resnet18' needs images (C, H, W), got {input_shape}")
        return ResNet18(input_shape[0], num_classes)
    if name == "wrn16-4":
        if len(input_shape) != 3:
            raise ConfigError(f"model 'wrn16-4' needs images (C, H, W), got {input_shape}")
        return WideResNet(input_shape[0], num_classes, depth=16, width=4)
    raise ConfigError(f"unknown model {name!r}; choose one of {', '.join(MODELS)}")


__all__ = ["build_model"]
