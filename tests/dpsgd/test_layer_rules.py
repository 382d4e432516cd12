"""The layer rules (dpsgd/layer_rules.py): both paths of a convolution (materialised per-example
gradients, ghost norms) match the loop, a path far costlier than the other is never tried, GroupNorm
works from saved or recomputed statistics, and workspaces are reused without stale values."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from labeldp.dpsgd import clipped_gradient_sum, conv_grads, layer_rules
from tests.dpsgd.reference import cases, loop_reference

pytestmark = pytest.mark.usefixtures("float64")  # tests/dpsgd/conftest.py


def _force_conv_path(monkeypatch, path: str) -> None:
    """Make every convolution take ``path`` ("materialise" or "ghost") instead of the faster one."""
    monkeypatch.setattr(layer_rules, "_TIMED_COST_RATIO", math.inf)  # both paths are candidates, whatever they cost
    original = conv_grads.fastest

    def forced(key, candidates, trials=None):
        return candidates[path]() if key[0] == "conv_path" else original(key, candidates, trials)

    monkeypatch.setattr(conv_grads, "fastest", forced)


@pytest.mark.parametrize("views", [1, 3])
@pytest.mark.parametrize("path", ["materialise", "ghost"])
def test_both_convolution_paths_match_the_loop(path, views, monkeypatch):
    _force_conv_path(monkeypatch, path)
    for case in ("cnn-inplace-relu", "tanh-cnn", "ws-groupnorm-conv", "ws-ghost-inplace", "wideresnet"):
        model, x, y = cases()[case]
        if views > 1:  # two examples suffice for the views' averaging; the large maps' Grams are costly
            x, y = torch.randn(2, views, *x.shape[1:]), y[:2]
        expected, expected_norms = loop_reference(model, x, y, 0.05, views=views > 1)
        got = clipped_gradient_sum(model, x, y, 0.05, method="fast", multiple_views=views > 1)
        for ours, reference in zip(got.sums, expected):
            assert float((ours - reference).norm() / reference.norm()) < 1e-5, case
        torch.testing.assert_close(got.norms, expected_norms, rtol=1e-5, atol=1e-12)


@pytest.mark.parametrize("untried", ["ghost", "materialise"])
def test_a_path_far_costlier_than_the_other_is_not_tried(untried, monkeypatch):
    """Large maps with few channels: the ghost path's T^2 Gram matrices are far costlier than the
    per-example kernel gradients; small maps with many channels: the other way round."""
    torch.manual_seed(5)
    if untried == "ghost":  # T = 400, d = 9, p = 4: ghost/materialise = T (d + p) / (d p) = 144
        conv, x = nn.Conv2d(1, 4, 3, padding=1), torch.randn(4, 1, 20, 20)
    else:  # T = 4, d = 288, p = 64: materialise/ghost = d p / (T (d + p)) = 13
        conv, x = nn.Conv2d(32, 64, 3, padding=1), torch.randn(4, 32, 2, 2)
    model = nn.Sequential(conv, nn.Flatten(), nn.Linear(conv.out_channels * x.shape[2] * x.shape[3], 3))
    y = torch.randint(0, 3, (4,))
    expected, expected_norms = loop_reference(model, x, y, 0.05)

    def refuse(*args, **kwargs):
        raise AssertionError(f"the {untried} path was tried")

    monkeypatch.setattr(conv_grads, "patch_gram" if untried == "ghost" else "per_example_kernel_grads", refuse)
    got = clipped_gradient_sum(model, x, y, 0.05, method="fast")
    for ours, reference in zip(got.sums, expected):
        assert float((ours - reference).norm() / reference.norm()) < 1e-5
    torch.testing.assert_close(got.norms, expected_norms, rtol=1e-5, atol=1e-12)


@pytest.mark.parametrize("statistics", ["saved", "recomputed"])
def test_group_norm_gradients_from_saved_or_recomputed_statistics_match_the_loop(statistics, monkeypatch):
    output = nn.GroupNorm(2, 4)(torch.randn(3, 4, 5, requires_grad=True))
    assert layer_rules._saved_group_stats(output) is not None  # this torch keeps them: the fast case is the usual one
    if statistics == "recomputed":
        monkeypatch.setattr(layer_rules, "_saved_group_stats", lambda output: None)
    model, x, y = cases()["wideresnet"]
    x = x + 5.0  # inputs far from zero mean
    expected, expected_norms = loop_reference(model, x, y, 0.05)
    got = clipped_gradient_sum(model, x, y, 0.05, method="fast")
    for ours, reference in zip(got.sums, expected):
        assert float((ours - reference).norm() / reference.norm()) < 1e-5
    torch.testing.assert_close(got.norms, expected_norms, rtol=1e-5, atol=1e-12)


def test_workspaces_are_reused_across_batch_sizes_without_stale_values(monkeypatch):
    _force_conv_path(monkeypatch, "materialise")
    model, x, y = cases()["cnn-inplace-relu"]
    x, y = torch.cat([x, x.flip(0)]), torch.cat([y, y.flip(0)])
    for size in (3, 10, 2, 10):  # grows, then views of the grown workspace, smaller and equal
        expected, expected_norms = loop_reference(model, x[:size], y[:size], 0.05)
        got = clipped_gradient_sum(model, x[:size], y[:size], 0.05, method="fast")
        for ours, reference in zip(got.sums, expected):
            assert float((ours - reference).norm() / reference.norm()) < 1e-5
        torch.testing.assert_close(got.norms, expected_norms, rtol=1e-5, atol=1e-12)
    convs = [m for m in model.modules() if isinstance(m, nn.Conv2d)]
    assert all(layer_rules._WORKSPACES[m].numel() <= 11 * m.weight.numel() for m in convs)
