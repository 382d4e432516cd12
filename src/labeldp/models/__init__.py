"""Torch modules for each kind of data, and :func:`build_model` to pick one by name."""

from __future__ import annotations

import torch
from torch import nn

from labeldp.errors import ConfigError
from labeldp.models.cnn import SmallCNN, TanhCNN
from labeldp.models.mlp import MLP
from labeldp.models.pooling import MaxPool2d
from labeldp.models.resnet import ResNet18
from labeldp.models.wideresnet import WideResNet, WSConv2d

MODELS = ("mlp", "cnn", "tanh-cnn", "resnet18", "wrn16-4")


def default_model_name(input_shape: tuple[int, ...]) -> str:
    """The model used when none is named: CNN for 28x28 images, ResNet-18 for 32x32, else MLP."""
    if len(input_shape) == 3 and input_shape[1:] == (28, 28):
        return "cnn"
    if len(input_shape) == 3 and input_shape[1:] == (32, 32):
        return "resnet18"
    return "mlp"


def build_model(name: str | None, input_shape: tuple[int, ...], num_classes: int, seed: int | None = None
                ) -> nn.Module:
    """Build model ``name`` (or the default for ``input_shape``) with ``num_classes`` outputs, on the
    CPU. With ``seed``, its initial weights come from that seed, and torch's global random state is
    left as it was."""
    if seed is None:
        return _build(name or default_model_name(input_shape), input_shape, num_classes)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return _build(name or default_model_name(input_shape), input_shape, num_classes)


def _build(name: str, input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    if name == "mlp":
        return MLP(input_shape, num_classes)
    if name == "cnn":
        if len(input_shape) != 3 or input_shape[1] != input_shape[2] or input_shape[1] % 4:
            raise ConfigError(f"model 'cnn' needs square images with side divisible by 4, got {input_shape}")
        return SmallCNN(input_shape[0], num_classes, input_shape[1])
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


__all__ = ["MLP", "MODELS", "MaxPool2d", "ResNet18", "SmallCNN", "TanhCNN", "WSConv2d", "WideResNet", "build_model", "default_model_name"]
