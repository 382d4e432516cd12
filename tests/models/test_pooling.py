"""Max pooling (models/pooling.py) matches torch's bit for bit, values, indices and gradients, also
under torch.func's per-example gradients."""

from __future__ import annotations

import pytest
import torch
from torch.func import grad as grad_of
from torch.func import vmap

from labeldp.models.pooling import MaxPool2d


@pytest.mark.parametrize(
    "settings",
    [
        dict(kernel_size=2),
        dict(kernel_size=2, stride=1),
        dict(kernel_size=3, stride=2, padding=1),
        dict(kernel_size=(2, 3), stride=(1, 2), dilation=2, ceil_mode=True),
    ],
)
@pytest.mark.parametrize("shape", [(4, 3, 9, 11), (3, 9, 11)])
def test_max_pool_matches_torch_bit_for_bit(settings, shape) -> None:
    torch.manual_seed(0)
    x = torch.round(torch.randn(shape) * 2)  # values on a coarse grid: many windows with tied maxima
    x[..., 0, :3] = float("nan")
    x = x.requires_grad_()
    ours, theirs = MaxPool2d(**settings, return_indices=True), torch.nn.MaxPool2d(**settings, return_indices=True)
    (values, indices), (expected_values, expected_indices) = ours(x), theirs(x)
    assert torch.equal(values.isnan(), expected_values.isnan()) and values.isnan().any()
    assert torch.equal(values.nan_to_num(), expected_values.nan_to_num()) and torch.equal(indices, expected_indices)
    grad_output = torch.randn_like(values)
    (grad,), (expected_grad,) = (
        torch.autograd.grad(values, x, grad_output),
        torch.autograd.grad(expected_values, x, grad_output),
    )
    assert torch.equal(grad, expected_grad) and grad.is_contiguous()
    # per-example gradients through torch.func, as the general DP-SGD clipping path takes them
    batch = torch.randn(5, *shape)

    def squares(pool):
        return lambda t: pool(t)[0].pow(2).sum()

    assert torch.equal(vmap(grad_of(squares(ours)))(batch), vmap(grad_of(squares(theirs)))(batch))
