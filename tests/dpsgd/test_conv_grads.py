"""Per-example gradients of convolutions (dpsgd/conv_grads.py): every strategy is exact, the patches
and their Gram matrices are what the convolution multiplies, ghost norms are the gradients' norms,
and the autotuning times only what can win and remembers it."""

from __future__ import annotations

import time

import pytest
import torch
from torch import nn

from labeldp.dpsgd import conv_grads
from tests.helpers import DEVICES

pytestmark = pytest.mark.usefixtures("float64")  # tests/dpsgd/conftest.py


def convolutions() -> tuple[nn.Conv2d, ...]:
    """Strided, dilated, rectangular, padded, 1x1 and non-overlapping convolutions (default dtype)."""
    return (
        nn.Conv2d(3, 4, 3, stride=2, padding=1),
        nn.Conv2d(2, 5, (3, 2), padding=(2, 1), dilation=2),
        nn.Conv2d(1, 3, 8, stride=2, padding=3),
        nn.Conv2d(2, 3, 1),
        nn.Conv2d(2, 3, 3, stride=3),
    )


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("strategy", conv_grads.STRATEGIES)
def test_every_convolution_strategy_is_exact(strategy, device):
    torch.manual_seed(1)
    for conv in convolutions():
        conv = conv.to(device)
        rows = max(conv_grads.ROWS_PER_CALL.values()) + 3  # full and partial row groups
        x = torch.randn(rows, conv.in_channels, 11, 11, device=device)
        out = conv(x)
        g = torch.randn_like(out)
        expected = torch.stack(
            [torch.autograd.grad(conv(x[i : i + 1]), conv.weight, g[i : i + 1])[0] for i in range(rows)]
        )
        torch.testing.assert_close(conv_grads.kernel_grads(strategy, conv, x, g, rows), expected)


@pytest.mark.parametrize("method", ["patches", "pixels", "auto"])
@pytest.mark.parametrize("views", [1, 3])
def test_patch_gram_and_sums_match_the_patches(method, views):
    torch.manual_seed(2)
    for conv in convolutions():
        x = torch.randn(2 * views, conv.in_channels, 11, 10)
        cols = conv_grads.patches(conv, x)  # (N, T, d)
        per_example = cols.reshape(2, -1, cols.shape[2])
        expected = torch.bmm(per_example, per_example.transpose(1, 2))
        torch.testing.assert_close(conv_grads.patch_gram(conv, x, 2, method), expected)
        torch.testing.assert_close(conv_grads.patch_sums(conv, x), cols.sum(2))


@pytest.mark.parametrize("views", [1, 3])
def test_ghost_norms_are_the_norms_of_the_per_example_kernel_gradients(views):
    torch.manual_seed(4)
    for conv in convolutions():
        x = torch.randn(2 * views, conv.in_channels, 11, 10)
        g = torch.randn_like(conv(x))
        per_example = conv_grads.kernel_grads("loop", conv, x, g, 2)  # summed over each example's views
        torch.testing.assert_close(conv_grads.ghost_norms2(conv, x, g, 2), per_example.flatten(1).pow(2).sum(1))


def test_patch_gram_tries_pixels_only_where_their_gram_matrix_is_not_much_larger(monkeypatch):
    timed = []
    original = conv_grads.fastest

    def recording(key, candidates, trials=None):
        timed.append((key[0], sorted(candidates)))
        return original(key, candidates, trials)

    monkeypatch.setattr(conv_grads, "fastest", recording)
    x = torch.randn(2, 4, 16, 16)
    conv_grads.patch_gram(nn.Conv2d(4, 4, 3, stride=2, padding=1), x, 2)  # pixel Gram 17^4 vs 8^4 entries
    assert timed == []
    conv_grads.patch_gram(nn.Conv2d(4, 4, 3, padding=1), x, 2)  # 18^4 vs 16^4
    assert timed == [("patch_gram", ["patches", "pixels"])]


def test_patches_are_what_the_convolution_multiplies():
    torch.manual_seed(3)
    for conv in convolutions():
        x = torch.randn(2, conv.in_channels, 11, 10)
        out = conv(x)
        kernel = conv.weight.permute(0, 2, 3, 1).flatten(1)  # entries in (kh, kw, C) order, as in the patches
        via_patches = conv_grads.patches(conv, x) @ kernel.t() + conv.bias
        torch.testing.assert_close(via_patches.transpose(1, 2).reshape(out.shape), out)


def test_autotuning_is_shared_by_batch_sizes_up_to_the_same_power_of_two(monkeypatch):
    conv = nn.Conv2d(3, 4, 3, padding=1)
    timed = []
    original = conv_grads.fastest

    def recording(key, candidates):
        if key not in conv_grads._FASTEST:
            timed.append(key)
        return original(key, candidates)

    monkeypatch.setattr(conv_grads, "fastest", recording)
    for batch in (9, 12, 16, 17):
        x = torch.randn(batch, 3, 6, 6)
        conv_grads.per_example_kernel_grads(conv, x, torch.randn(batch, 4, 6, 6), batch)
    assert len(timed) == 2  # 9..16 share one timing, 17 starts the next


def test_fastest_runs_the_faster_candidate_and_remembers_it():
    calls = []

    def slow():
        time.sleep(0.02)
        calls.append("slow")
        return torch.zeros(1)

    def quick():
        calls.append("quick")
        return torch.ones(1)

    key = ("test_fastest", id(calls))
    assert float(conv_grads.fastest(key, {"slow": slow, "quick": quick})) == 1.0
    assert calls.count("slow") == 3 and calls.count("quick") == 4  # once untimed, twice timed, then the winner
    calls.clear()
    assert float(conv_grads.fastest(key, {"slow": slow, "quick": quick})) == 1.0
    assert calls == ["quick"]
