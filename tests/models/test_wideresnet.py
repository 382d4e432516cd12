"""The WideResNet's weight-standardised convolution (models/wideresnet.py): standardisation per output
channel."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from labeldp.models import WSConv2d


def test_weight_standardisation_is_per_output_channel() -> None:
    torch.manual_seed(0)
    conv = WSConv2d(6, 5, 3, eps=1e-5)
    with torch.no_grad():
        conv.weight.mul_(torch.arange(1.0, 6.0).view(5, 1, 1, 1)).add_(3.0)  # channels of different scales
    weight = conv.weight.detach().double().flatten(1)
    expected = (weight - weight.mean(1, keepdim=True)) / torch.sqrt(weight.var(1, keepdim=True, unbiased=False) + 1e-5)
    torch.testing.assert_close(conv.standardized_weight().detach().double().flatten(1), expected, rtol=1e-5, atol=1e-5)
    standardized, scale = conv.standardization()
    torch.testing.assert_close(standardized.double(), expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(scale.double().squeeze(1), torch.sqrt(weight.var(1, unbiased=False) + 1e-5))
    x = torch.randn(2, 6, 7, 7)
    torch.testing.assert_close(
        conv(x), F.conv2d(x, expected.float().view_as(conv.weight), conv.bias), rtol=1e-4, atol=1e-5
    )
