""":class:`MaxPool2d`, a drop-in for :class:`torch.nn.MaxPool2d` that is fast on CPU.

torch's CPU forward kernel is several times slower on (N, C, H, W) tensors than on channels-last ones,
while its backward kernel is fast in (N, C, H, W) order (docs/dpsgd.md, max-pooling on CPU). So the
maxima are found channels-last and the gradients passed back in (N, C, H, W) order: values, chosen
positions (the first maximum of a window) and gradients are torch's bit for bit.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.modules.utils import _pair


def _channels_last(x: torch.Tensor) -> torch.Tensor:
    """``x`` stored channels-last; by ``movedim``, since ``torch.func`` transforms do not support ``memory_format``."""
    return x.movedim(-3, -1).contiguous().movedim(-1, -3)


class _ChannelsLastMaxPool(torch.autograd.Function):
    """max_pool2d_with_indices: forward on a channels-last copy, backward in (N, C, H, W) order."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x, kernel_size, stride, padding, dilation, ceil_mode):
        """Each window's maximum and its flat position in the (H, W) plane, found on a channels-last copy."""
        values, indices = torch.ops.aten.max_pool2d_with_indices(
            _channels_last(x), kernel_size, stride, padding, dilation, ceil_mode
        )
        return values.contiguous(), indices.contiguous()

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:
        x, *ctx.settings = inputs
        ctx.save_for_backward(x, output[1])
        ctx.mark_non_differentiable(output[1])

    @staticmethod
    def backward(ctx, grad_values, _grad_indices):
        """The input's gradient, by torch's (N, C, H, W) backward kernel."""
        x, indices = ctx.saved_tensors
        grad = torch.ops.aten.max_pool2d_with_indices_backward(grad_values.contiguous(), x, *ctx.settings, indices)
        return grad, None, None, None, None, None


class MaxPool2d(nn.MaxPool2d):
    """:class:`torch.nn.MaxPool2d` (same arguments, values and gradients) that pools channels-last on CPU.

    Several times faster there (see :mod:`labeldp.models.pooling`); elsewhere it is ``nn.MaxPool2d``.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        if x.device.type != "cpu" or x.dim() not in (3, 4):
            return super().forward(x)
        values, indices = _ChannelsLastMaxPool.apply(
            x, _pair(self.kernel_size), _pair(self.stride), _pair(self.padding), _pair(self.dilation), self.ceil_mode
        )
        return (values, indices) if self.return_indices else values
