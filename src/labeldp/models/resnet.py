"""ResNet-18 for 32x32 images (CIFAR variant: 3x3 stem, no max-pool)."""

from __future__ import annotations

import torch
from torch import nn


class BasicBlock(nn.Module):
    """A ResNet basic block: two 3x3 convolutions with batch norm, and a shortcut.

    The shortcut is a 1x1 convolution with batch norm when the stride or the width changes, else the
    identity.

    Parameters
    ----------
    in_planes : int
        Input channels.
    planes : int
        Output channels.
    stride : int
        Stride of the first convolution and of the shortcut.

    Attributes
    ----------
    conv1, bn1, conv2, bn2 : torch.nn.Module
        The two convolutions and their batch norms.
    shortcut : torch.nn.Sequential
        The shortcut (empty for the identity).
    """

    def __init__(self, in_planes: int, planes: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = nn.Sequential()
        if stride != 1 or in_planes != planes:
            self.shortcut = nn.Sequential(nn.Conv2d(in_planes, planes, 1, stride, bias=False), nn.BatchNorm2d(planes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The block's output.

        Parameters
        ----------
        x : torch.Tensor
            Input of shape (B, in_planes, H, W).

        Returns
        -------
        torch.Tensor
            Output of shape (B, planes, H / stride, W / stride).
        """
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return torch.relu(out + self.shortcut(x))


class ResNet18(nn.Module):
    """The standard CIFAR ResNet-18 (11M parameters): four stages of two basic blocks.

    Its batch norm layers mix the examples of a batch: DP-SGD refuses it unless they are replaced
    (:func:`labeldp.dpsgd.replace_batchnorm`).

    Parameters
    ----------
    in_channels : int, optional
        Channels of the input images (default 3).
    num_classes : int, optional
        Number of outputs (default 10).

    Attributes
    ----------
    stem : torch.nn.Sequential
        3x3 convolution to 64 channels, batch norm, ReLU.
    blocks : torch.nn.Sequential
        The eight :class:`BasicBlock` modules.
    head : torch.nn.Linear
        The classifier over the globally average-pooled 512 features.
    """

    def __init__(self, in_channels: int = 3, num_classes: int = 10):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(in_channels, 64, 3, 1, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True)
        )
        blocks, in_planes = [], 64
        for planes, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            blocks += [BasicBlock(in_planes, planes, stride), BasicBlock(planes, planes, 1)]
            in_planes = planes
        self.blocks = nn.Sequential(*blocks)
        self.head = nn.Linear(512, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits of a batch of images.

        Parameters
        ----------
        x : torch.Tensor
            Images of shape (B, in_channels, H, W), 32x32 for the CIFAR design.

        Returns
        -------
        torch.Tensor
            Logits of shape (B, num_classes).
        """
        out = self.blocks(self.stem(x))
        return self.head(torch.flatten(nn.functional.adaptive_avg_pool2d(out, 1), 1))
