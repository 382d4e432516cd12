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
    """A 2x2 first convolution, three conv groups with batch norm, a global max-pool, the classifier.

    Model ``"convnet"``. The layout of airbench's CIFAR-10 network scaled down for CPUs: a 2x2
    convolution (``first`` channels, GELU; airbench fixes it to whiten the image patches, here it
    learns), then three groups of two 3x3 convolutions (``widths`` channels), each group halving the
    side with a max-pool and normalising with batch norm, a global max-pool and a bias-free linear
    classifier. Its tensors are channels-last, the order in which torch's CPU convolutions of few
    channels are fastest.

    73,704 parameters for 1x28x28 inputs and 10 classes, against the small CNN's 417,482; a training
    step costs about what the small CNN's does (one thread, batch 128: 31-35 ms against 28-31 ms; 50 ms
    in (N, C, H, W) order). Non-private on MNIST with one thread (``benchmarks/image_networks.py``, 2
    seeds), 6 epochs at learning rate 0.1 reached 99.63 and 99.53 % in 119 CPU seconds and 12 epochs
    99.64 and 99.67 % in 215, where the small CNN's 12 epochs reached 99.44 and 99.55 % in 189: the
    default for 28x28 images (:func:`~labeldp.models.names.default_model_name`).

    Its batch norm layers mix the examples of a batch, so DP-SGD refuses it; label-DP methods train it
    like any network.

    Maps images (B, in_channels, H, W), H and W at least 17, to logits (B, num_classes): the last group
    then normalises maps of at least 2x2, so that a batch of one example still has batch statistics.

    Parameters
    ----------
    in_channels : int, optional
        Channels of the input images (default 1).
    num_classes : int, optional
        Number of outputs (default 10).
    widths : tuple of int, optional
        Channels of the three conv groups (default (16, 32, 64)).
    first : int, optional
        Channels of the first 2x2 convolution (default 8).
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
        self.to(memory_format=torch.channels_last)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # noqa: D102
        return super().forward(x.contiguous(memory_format=torch.channels_last))
