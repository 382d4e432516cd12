"""WideResNet with GroupNorm and weight-standardised convolutions: De et al.'s (2022) DP-SGD network for
32x32 images. No batch statistics, so per-example gradients are defined.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from labeldp.errors import ConfigError


def _standardize(kernel: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(y, s): each row of a (out_channels, fan_in) kernel centred and divided by s = sqrt(var + eps).

    Two passes (the mean, then the centred mean square): much faster on CPU than torch.var, as accurate.
    """
    centred = kernel - kernel.mean(dim=1, keepdim=True)
    scale = torch.sqrt(centred.pow(2).mean(dim=1, keepdim=True) + eps)
    return centred / scale, scale


class WSConv2d(nn.Conv2d):
    """A convolution whose kernel is standardised per output channel on every call (Qiao et al. 2019).

    Each channel's kernel has zero mean and unit variance over its fan-in; ``weight`` holds the raw
    parameters and ``eps`` is added to each variance. The gradient methods serve per-example clipping.
    """

    def __init__(self, *args, eps: float = 1e-5, **kwargs):
        super().__init__(*args, **kwargs)
        self.eps = eps

    def standardized_weight(self) -> torch.Tensor:
        """The standardised kernel, shaped like ``weight`` and differentiable with respect to it."""
        return _standardize(self.weight.flatten(1), self.eps)[0].view_as(self.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._conv_forward(x, self.standardized_weight(), self.bias)

    def standardization(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(y, s), detached: the standardised kernel (out_channels, fan_in) and each channel's scale s."""
        return _standardize(self.weight.detach().flatten(1), self.eps)

    def weight_gradient(
        self, standardized_grads: torch.Tensor, standardization: tuple[torch.Tensor, torch.Tensor] | None = None
    ) -> torch.Tensor:
        """Map per-example gradients G (B, *weight.shape) with respect to y = (w - mean) / s to ``weight``'s.

        Per output channel (G - mean(G) - y mean(G y)) / s, means over the fan-in: linear in G.
        """
        standardized, scale = standardization or self.standardization()
        grads = standardized_grads.flatten(2)
        centred = grads - grads.mean(dim=2, keepdim=True)
        projected = centred - standardized * (grads * standardized).mean(dim=2, keepdim=True)
        return (projected / scale).view_as(standardized_grads)

    def weight_gradient_norms2(
        self,
        scaled_norms2: torch.Tensor,
        sums: torch.Tensor,
        dots: torch.Tensor,
        standardization: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """Squared norms (B,) of :meth:`weight_gradient` of G, from three statistics of G, forming neither.

        ``scaled_norms2`` (B,) = sum_r |G_r|^2 / s_r^2 over output channels r; per channel (B, out_channels)
        ``sums`` = sum(G_r) and ``dots`` = G_r . y_r. With n the fan-in and m = dots / n, channel r adds
        (|G_r|^2 - sums^2 / n - 2 n m^2 + m^2 |y_r|^2) / s_r^2.
        """
        standardized, scale = standardization or self.standardization()
        fan_in = standardized.shape[1]
        m = dots / fan_in
        extra = -sums.pow(2) / fan_in - 2 * fan_in * m.pow(2) + m.pow(2) * standardized.pow(2).sum(1)
        return scaled_norms2 + (extra / scale.squeeze(1).pow(2)).sum(1)


def _group_norm(channels: int, groups: int) -> nn.GroupNorm:
    return nn.GroupNorm(min(groups, channels), channels)


class _Block(nn.Module):
    """Pre-activation residual block: GN-ReLU-conv3x3-GN-ReLU-conv3x3, 1x1 projection when shapes change."""

    def __init__(self, in_planes: int, planes: int, stride: int, groups: int):
        super().__init__()
        self.norm1 = _group_norm(in_planes, groups)
        self.conv1 = WSConv2d(in_planes, planes, 3, stride, 1, bias=False)
        self.norm2 = _group_norm(planes, groups)
        self.conv2 = WSConv2d(planes, planes, 3, 1, 1, bias=False)
        self.shortcut = (
            WSConv2d(in_planes, planes, 1, stride, bias=False) if stride != 1 or in_planes != planes else None
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.norm1(x))
        skip = x if self.shortcut is None else self.shortcut(out)
        out = self.conv1(out)
        out = self.conv2(F.relu(self.norm2(out)))
        return out + skip


class WideResNet(nn.Module):
    """WRN-``depth``-``width`` for 32x32 images (``depth`` = 6n + 4).

    A 16-channel stem, three stages of (depth - 4) / 6 blocks of 16w, 32w and 64w channels, GroupNorm of
    ``groups`` groups (at most a layer's channels), global average pooling.
    """

    def __init__(self, in_channels: int = 3, num_classes: int = 10, depth: int = 16, width: int = 4, groups: int = 16):
        super().__init__()
        if (depth - 4) % 6:
            raise ConfigError(f"WideResNet depth must be 6n + 4, got {depth}")
        blocks = (depth - 4) // 6
        widths = (16 * width, 32 * width, 64 * width)
        self.stem = WSConv2d(in_channels, 16, 3, 1, 1, bias=False)
        layers, planes = [], 16
        for stage, out_planes in enumerate(widths):
            for index in range(blocks):
                layers.append(_Block(planes, out_planes, 2 if stage > 0 and index == 0 else 1, groups))
                planes = out_planes
        self.blocks = nn.Sequential(*layers)
        self.norm = _group_norm(planes, groups)
        self.head = nn.Linear(planes, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.norm(self.blocks(self.stem(x))))
        return self.head(out.mean(dim=(2, 3)))
