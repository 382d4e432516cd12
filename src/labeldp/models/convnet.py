"""A batch-norm convolutional network after airbench's (Jordan, 2024), sized for CPUs."""

from __future__ import annotations

import torch
from torch import nn


class _ConvGroup(nn.Sequential):
    """3x3 conv, 2x2 max-pool, batch norm, GELU; 3x3 conv, batch norm, GELU (airbench's ``ConvGroup``)."""

    def __init__(self, inputs: int, outputs: int):
        super().__init__(
            nn.Conv2d(inputs, outputs, 3, padding=1, bias=False),
            nn.MaxPool2d(2),
            nn.BatchNorm2d(outputs),
            nn.GELU(),
            nn.Conv2d(outputs, outputs, 3, padding=1, bias=False),
            nn.BatchNorm2d(outputs),
            nn.GELU(),
        )


class ConvNet(nn.Sequential):
    """A batch-norm network after airbench's CIFAR-10 one, scaled down for CPUs (model ``"convnet"``).

    A 2x2 convolution (``first`` channels, GELU; learnt, where airbench fixes it to whiten patches), three
    groups of two 3x3 convolutions (``widths`` channels) that pool then normalise, a global max-pool and a
    bias-free classifier. Tensors are channels-last, the order in which torch's CPU convolutions of few
    channels are fastest. The default for 28x28 images (docs/guides/images.md says why).

    Batch norm mixes a batch's examples, so DP-SGD refuses it. Images must be at least 17x17, so that the
    last group normalises maps of at least 2x2 and a batch of one still has batch statistics.
    """

    def __init__(
        self, in_channels: int = 1, num_classes: int = 10, widths: tuple[int, int, int] = (16, 32, 64), first: int = 8
    ):
        groups = [_ConvGroup(inputs, outputs) for inputs, outputs in zip((first, *widths[:-1]), widths)]
        super().__init__(
            nn.Conv2d(in_channels, first, 2),
            nn.GELU(),
            *groups,
            nn.AdaptiveMaxPool2d(1),
            nn.Flatten(),
            nn.Linear(widths[-1], num_classes, bias=False),
        )
        self.to(memory_format=torch.channels_last)  # type: ignore[call-overload]  # Module.to's overloads omit it

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # noqa: D102
        return super().forward(x.contiguous(memory_format=torch.channels_last))
