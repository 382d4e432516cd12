"""DP-SGD: per-example clipping against a loop reference, noise, Poisson sampling, calibration, runs."""

from __future__ import annotations

import dataclasses
import json
import math
import time

import numpy as np
import pytest
import torch
from scipy import stats
from torch import nn
from torch.optim.swa_utils import AveragedModel

from labeldp.accounting import (
    DPSGD_RELATION,
    PrivacyLedger,
    calibrate_noise_multiplier,
    dpsgd_epsilon,
    dpsgd_event,
    randomized_response_event,
)
from labeldp.config.dpsgd import DPSGDConfig
from labeldp.dpsgd import (
    PoissonSampler,
    UnsupportedModelError,
    clipped_gradient_sum,
    clipping,
    conv_grads,
    cross_entropy_per_example,
    gaussian_noise,
    layer_rules,
    privatize_gradients,
    replace_batchnorm,
    secure_normal,
)
from labeldp.dpsgd.trainer import _ema_with_warmup, train_dpsgd
from labeldp.models import SmallCNN, TanhCNN, WideResNet, WSConv2d
from labeldp.randomness import NoiseSource, SecureGenerator
from labeldp.runs import RunConfig, train_run
from labeldp.training import TrainConfig
from tests.helpers import DEVICES


@pytest.fixture(autouse=True)
def float64():
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(previous)


def loop_reference(model, x, y, max_grad_norm, views=False):
    """Clipped sum and norms from one backward pass per example (the definition)."""
    params = [p for p in model.parameters() if p.requires_grad]
    sums, norms = [torch.zeros_like(p) for p in params], []
    for i in range(len(x)):
        xi = x[i] if views else x[i : i + 1]
        yi = y[i : i + 1].repeat(len(xi))
        grads = torch.autograd.grad(cross_entropy_per_example(model(xi), yi).mean(), params)
        norm = torch.sqrt(sum(g.pow(2).sum() for g in grads))
        norms.append(norm)
        for total, g in zip(sums, grads):
            total.add_(g * min(1.0, max_grad_norm / (float(norm) + 1e-6)))
    return sums, torch.stack(norms)


class EmbeddingText(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(20, 8, padding_idx=0)
        self.norm = nn.LayerNorm(8)
        self.out = nn.Linear(8, 5)

    def forward(self, tokens):
        return self.out(torch.relu(self.norm(self.embed(tokens)))).mean(1)


class ConvGroupNorm(nn.Module):
    """WS conv, GroupNorm, a strided conv, a dilated conv with many channels (ghost norms), Linear."""

    def __init__(self):
        super().__init__()
        self.ws = WSConv2d(3, 8, 3, padding=1)
        self.gn = nn.GroupNorm(4, 8)
        self.strided = nn.Conv2d(8, 48, 3, stride=2)
        self.wide = nn.Conv2d(48, 64, 3, padding=2, dilation=2, bias=False)
        self.head = nn.Linear(64, 5)

    def forward(self, x):
        h = torch.relu(self.gn(self.ws(x)))
        h = torch.relu(self.wide(torch.relu(self.strided(h))))
        return self.head(h.mean((2, 3)))


class StandardizedInPlace(nn.Module):
    """Weight-standardised convs on a small map (ghost norms) whose outputs are changed in place."""

    def __init__(self):
        super().__init__()
        self.first = WSConv2d(3, 40, 3, padding=1)
        self.second = WSConv2d(40, 48, 3, padding=1, bias=False)
        self.head = nn.Linear(48, 4)

    def forward(self, x):
        h = torch.relu_(self.first(x))
        return self.head(torch.relu_(self.second(h)).mean((2, 3)))


def _cases():
    torch.manual_seed(0)
    return {
        "mlp": (
            nn.Sequential(nn.Flatten(), nn.Linear(12, 7), nn.Tanh(), nn.Linear(7, 3)),
            torch.randn(6, 3, 4),
            torch.randint(0, 3, (6,)),
        ),
        "sequence-linear": (
            nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 3), nn.Flatten(), nn.Linear(15, 3)),
            torch.randn(6, 5, 4),
            torch.randint(0, 3, (6,)),
        ),
        "cnn-inplace-relu": (
            SmallCNN(channels=(4, 6), hidden=16),
            torch.randn(5, 1, 28, 28),
            torch.randint(0, 10, (5,)),
        ),
        "tanh-cnn": (TanhCNN(), torch.randn(5, 1, 28, 28), torch.randint(0, 10, (5,))),
        "embedding-layernorm": (EmbeddingText(), torch.randint(0, 20, (6, 7)), torch.randint(0, 5, (6,))),
        "ws-groupnorm-conv": (ConvGroupNorm(), torch.randn(5, 3, 9, 9), torch.randint(0, 5, (5,))),
        "ws-ghost-inplace": (StandardizedInPlace(), torch.randn(4, 3, 3, 3), torch.randint(0, 4, (4,))),
        "wideresnet": (WideResNet(depth=10, width=1, groups=4), torch.randn(3, 3, 8, 8), torch.randint(0, 10, (3,))),
    }


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("method", ["fast", "vmap"])
@pytest.mark.parametrize("max_grad_norm", [0.05, math.inf])
@pytest.mark.parametrize("case", list(_cases()))
def test_clipped_sum_matches_per_example_loop(case, max_grad_norm, method, device):
    model, x, y = _cases()[case]
    model, x, y = model.to(device), x.to(device), y.to(device)
    expected, expected_norms = loop_reference(model, x, y, max_grad_norm)
    got = clipped_gradient_sum(model, x, y, max_grad_norm, method=method, physical_batch_size=4)
    assert len(got.sums) == len(expected)
    for ours, reference in zip(got.sums, expected):
        assert float((ours - reference).norm() / reference.norm().clamp(min=1e-30)) < 1e-5
    torch.testing.assert_close(got.norms, expected_norms, rtol=1e-5, atol=1e-12)
    assert all(p.grad is None for p in model.parameters())  # the model's own gradients are untouched


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


@pytest.mark.parametrize("method", ["fast", "vmap"])
@pytest.mark.parametrize("case", ["ws-groupnorm-conv", "ws-ghost-inplace", "wideresnet"])
def test_augmentation_multiplicity_averages_views_before_clipping(case, method):
    model, x, y = _cases()[case]
    x = torch.randn(len(x), 3, *x.shape[1:])  # 3 views of each example
    expected, expected_norms = loop_reference(model, x, y, 0.05, views=True)
    got = clipped_gradient_sum(model, x, y, 0.05, method=method, multiple_views=True)
    for ours, reference in zip(got.sums, expected):
        assert float((ours - reference).norm() / reference.norm()) < 1e-5
    torch.testing.assert_close(got.norms, expected_norms, rtol=1e-5, atol=1e-12)


def test_partly_frozen_layers_match_the_loop():
    model, x, y = _cases()["ws-groupnorm-conv"]
    model.ws.weight.requires_grad_(False)  # a conv with only its bias trainable
    model.gn.bias.requires_grad_(False)  # a GroupNorm with only its weight trainable
    expected, expected_norms = loop_reference(model, x, y, 0.05)
    got = clipped_gradient_sum(model, x, y, 0.05, method="fast")
    assert len(got.sums) == len(expected)
    for ours, reference in zip(got.sums, expected):
        assert float((ours - reference).norm() / reference.norm()) < 1e-5
    torch.testing.assert_close(got.norms, expected_norms, rtol=1e-5, atol=1e-12)


@pytest.mark.parametrize("method", ["fast", "vmap"])
def test_inputs_that_require_gradients_are_taken_as_constants(method):
    model, x, y = _cases()["cnn-inplace-relu"]
    expected, expected_norms = loop_reference(model, x, y, 0.05)
    got = clipped_gradient_sum(model, x.clone().requires_grad_(), y, 0.05, method=method)
    assert not any(total.requires_grad for total in got.sums)
    for ours, reference in zip(got.sums, expected):
        assert float((ours - reference).norm() / reference.norm()) < 1e-5
    torch.testing.assert_close(got.norms, expected_norms, rtol=1e-5, atol=1e-12)


class ExternalScale(nn.Module):
    """Linear layers fed with tensors that require gradients but are no parameters: ``where`` says
    where ``scale`` enters -- before the first layer, into a branch of its own, or between layers."""

    def __init__(self, where: str):
        super().__init__()
        self.where = where
        self.scale = torch.linspace(0.5, 2.0, 4).requires_grad_()  # a plain tensor, not a parameter
        self.first, self.second = nn.Linear(4, 4), nn.Linear(4, 3)

    def forward(self, x):
        if self.where == "input":
            return self.second(torch.tanh(self.first(x * self.scale)))
        if self.where == "branch":  # the second layer's input owes its gradient to ``scale`` alone
            return self.second(x * self.scale) + self.first(x)[:, :3]
        return self.second(torch.tanh(self.first(x)) * self.scale)


@pytest.mark.parametrize("method", ["fast", "vmap"])
@pytest.mark.parametrize("where", ["input", "branch", "between"])
def test_tensors_that_require_gradients_outside_the_parameters_are_constants(where, method):
    torch.manual_seed(0)
    model, x, y = ExternalScale(where), torch.randn(6, 4), torch.randint(0, 3, (6,))
    expected, expected_norms = loop_reference(model, x, y, 0.5)
    got = clipped_gradient_sum(model, x, y, 0.5, method=method)
    assert not any(total.requires_grad for total in got.sums)
    for ours, reference in zip(got.sums, expected):
        assert float((ours - reference).norm() / reference.norm()) < 1e-5
    torch.testing.assert_close(got.norms, expected_norms, rtol=1e-5, atol=1e-12)
    assert model.scale.grad is None


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
        model, x, y = _cases()[case]
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
    model, x, y = _cases()["wideresnet"]
    x = x + 5.0  # inputs far from zero mean
    expected, expected_norms = loop_reference(model, x, y, 0.05)
    got = clipped_gradient_sum(model, x, y, 0.05, method="fast")
    for ours, reference in zip(got.sums, expected):
        assert float((ours - reference).norm() / reference.norm()) < 1e-5
    torch.testing.assert_close(got.norms, expected_norms, rtol=1e-5, atol=1e-12)


def test_workspaces_are_reused_across_batch_sizes_without_stale_values(monkeypatch):
    _force_conv_path(monkeypatch, "materialise")
    model, x, y = _cases()["cnn-inplace-relu"]
    x, y = torch.cat([x, x.flip(0)]), torch.cat([y, y.flip(0)])
    for size in (3, 10, 2, 10):  # grows, then views of the grown workspace, smaller and equal
        expected, expected_norms = loop_reference(model, x[:size], y[:size], 0.05)
        got = clipped_gradient_sum(model, x[:size], y[:size], 0.05, method="fast")
        for ours, reference in zip(got.sums, expected):
            assert float((ours - reference).norm() / reference.norm()) < 1e-5
        torch.testing.assert_close(got.norms, expected_norms, rtol=1e-5, atol=1e-12)
    convs = [m for m in model.modules() if isinstance(m, nn.Conv2d)]
    assert all(layer_rules._WORKSPACES[m].numel() <= 11 * m.weight.numel() for m in convs)


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


def _tf32_settings() -> tuple:
    backends = torch.backends
    return (backends.cudnn.conv.fp32_precision, backends.cudnn.rnn.fp32_precision, backends.cuda.matmul.fp32_precision)


@pytest.mark.skipif(not hasattr(torch.backends.cuda.matmul, "fp32_precision"), reason="torch < 2.9: no fp32_precision")
@pytest.mark.parametrize("user_setting", ["legacy", "new"])
@pytest.mark.parametrize("method", ["fast", "vmap"])
def test_clipped_sum_runs_without_tf32_and_restores_the_settings(method, user_setting):
    """TF32 off inside, whichever of torch's two APIs the user turned it on with; theirs restored."""
    seen = []

    def recording_loss(outputs, targets):
        seen.append(_tf32_settings())
        return cross_entropy_per_example(outputs, targets)

    backends, before = torch.backends, _tf32_settings()
    try:
        if user_setting == "legacy":
            backends.cudnn.allow_tf32 = backends.cuda.matmul.allow_tf32 = True
        else:
            backends.cudnn.conv.fp32_precision = backends.cuda.matmul.fp32_precision = "tf32"
        users = _tf32_settings()
        model, x, y = _cases()["tanh-cnn"]
        clipped_gradient_sum(model, x, y, 1.0, recording_loss, method=method, physical_batch_size=2)
        assert seen and all(flags == ("ieee", "ieee", "ieee") for flags in seen)
        assert _tf32_settings() == users
        if user_setting == "legacy":
            assert backends.cudnn.allow_tf32 and backends.cuda.matmul.allow_tf32
    finally:
        backends.cudnn.conv.fp32_precision, backends.cudnn.rnn.fp32_precision, backends.cuda.matmul.fp32_precision = (
            before
        )


def test_no_noise_and_no_clipping_is_plain_sgd():
    model, x, y = _cases()["cnn-inplace-relu"]
    nn.functional.cross_entropy(model(x), y).backward()
    plain = [p.grad.clone() for p in model.parameters()]
    clipped = clipped_gradient_sum(model, x, y, math.inf)
    privatize_gradients(model, clipped, 0.0, math.inf, expected_batch_size=len(x))
    for param, reference in zip(model.parameters(), plain):
        torch.testing.assert_close(param.grad, reference)


def test_empty_batch_gives_zero_sum_and_pure_noise():
    model, x, y = _cases()["mlp"]
    clipped = clipped_gradient_sum(model, x[:0], y[:0], 1.0)
    assert clipped.norms.numel() == 0 and all(float(s.abs().sum()) == 0 for s in clipped.sums)
    privatize_gradients(model, clipped, 1.0, 1.0, 10.0, torch.Generator().manual_seed(0))
    assert all(float(p.grad.abs().sum()) > 0 for p in model.parameters())


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("source", ["seeded", "secure", "fresh"])
def test_noise_scale(source, device):
    """The added noise is N(0, (sigma C / B)^2) per coordinate: mean, variance and normality."""
    model = nn.Linear(100, 100).to(device)
    zero = clipping.ClippedGradients([torch.zeros_like(p) for p in model.parameters()], torch.zeros(0))
    generator = {"secure": "secure", "fresh": None}.get(source, torch.Generator(device=device).manual_seed(3))
    privatize_gradients(
        model, zero, noise_multiplier=1.5, max_grad_norm=0.4, expected_batch_size=8.0, generator=generator
    )
    assert all(p.grad.device == p.device for p in model.parameters())
    noise = torch.cat([p.grad.flatten() for p in model.parameters()]).cpu().numpy()
    std = 1.5 * 0.4 / 8.0
    n = noise.size
    assert abs(noise.mean()) < 5 * std / math.sqrt(n)
    # (n - 1) s^2 / std^2 ~ chi2(n - 1): two-sided 1e-4 test
    statistic = (n - 1) * noise.var(ddof=1) / std**2
    assert stats.chi2.ppf(5e-5, n - 1) < statistic < stats.chi2.ppf(1 - 5e-5, n - 1)
    assert stats.kstest(noise / std, "norm").pvalue > 1e-4


def test_noise_scale_test_has_power():
    """The variance check above rejects a noise standard deviation 10% too small."""
    noise = gaussian_noise(torch.zeros(10100), 0.9, torch.Generator().manual_seed(0)).numpy()
    statistic = (noise.size - 1) * noise.var(ddof=1)
    assert not stats.chi2.ppf(5e-5, noise.size - 1) < statistic


def test_secure_normal_is_standard_normal():
    sample = secure_normal((20000,), dtype=torch.float64).numpy()
    assert stats.kstest(sample, "norm").pvalue > 1e-4
    with pytest.raises(ValueError, match="generator"):
        gaussian_noise(torch.zeros(3), 1.0, "urandom")


def test_poisson_batch_sizes_are_binomial():
    n, q, steps = 200, 0.05, 4000
    sampler = PoissonSampler(n, q, steps, torch.Generator().manual_seed(0))
    batches = list(sampler)
    sizes = np.array([len(b) for b in batches])
    assert len(batches) == steps and all(len(set(b)) == len(b) for b in batches)
    # chi-square goodness of fit against Binomial(n, q), pooling tails
    edges = np.arange(4, 18)
    observed = np.array([(sizes < edges[0]).sum()] + [(sizes == k).sum() for k in edges] + [(sizes > edges[-1]).sum()])
    pmf = stats.binom(n, q)
    expected = steps * np.array([pmf.cdf(edges[0] - 1)] + [pmf.pmf(k) for k in edges] + [pmf.sf(edges[-1])])
    assert stats.chisquare(observed, expected).pvalue > 1e-4
    # each example's inclusion rate is q
    counts = np.bincount(np.concatenate(batches).astype(int), minlength=n)
    assert abs(counts.mean() / steps - q) < 4 * math.sqrt(q * (1 - q) / (steps * n))


def test_poisson_sampler_yields_empty_batches():
    sizes = [len(b) for b in PoissonSampler(10, 0.05, 200, torch.Generator().manual_seed(0))]
    assert 0 in sizes and max(sizes) > 0  # P(empty) = 0.95^10 = 0.6


def test_default_dpsgd_runs_with_the_same_seed_sample_different_batches(monkeypatch):
    """The batches are secret: two runs with the same seed (and the default noise) draw different ones,
    also with the secure generator; only the insecure seed repeats them."""
    drawn = []
    real = PoissonSampler.sample

    def spy(self):
        batch = real(self)
        drawn[-1].append(batch.tolist())
        return batch

    monkeypatch.setattr(PoissonSampler, "sample", spy)
    torch.set_default_dtype(torch.float32)
    x = np.random.default_rng(0).normal(size=(200, 5)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64)
    config = TrainConfig(epochs=2, batch_size=20, lr=0.1, weight_decay=0.0, augment=False)
    for noise in (None, None, NoiseSource(secure=True), NoiseSource(insecure_seed=4), NoiseSource(insecure_seed=4)):
        drawn.append([])
        torch.manual_seed(0)
        train_dpsgd(nn.Linear(5, 2), x, y, config, DPSGDConfig(ema_decay=0.0), 1.0, seed=1, noise=noise, progress=False)
    assert drawn[0] != drawn[1] and drawn[0] != drawn[2] and drawn[1] != drawn[2]
    assert drawn[3] == drawn[4]
    assert len(drawn[0]) == 2 * 10


def test_poisson_sampling_never_exceeds_the_accounted_rate():
    """Inclusion is decided on 53-bit uniforms against q rounded down to their grid: the uniform on
    q's own grid point leaves the example out, the one below takes it in."""
    q = 0.3
    on_grid = int(q * 2**53) / 2**53

    class Constant(SecureGenerator):
        def __init__(self, value: float):
            super().__init__()
            self.value = value

        def random(self, size=None):
            return np.full(size, self.value)

    assert PoissonSampler(4, q, 1, Constant(on_grid)).sample().numel() == 0
    assert PoissonSampler(4, q, 1, Constant(on_grid - 2**-53)).sample().numel() == 4


@pytest.mark.parametrize("epsilon,q,steps", [(1.0, 0.01, 1000), (2.0, 256 / 60000, 2340), (4.0, 0.1, 50)])
def test_calibration_meets_target_and_is_within_one_percent_of_smallest(epsilon, q, steps):
    sigma = calibrate_noise_multiplier(epsilon, 1e-5, q, steps)
    assert dpsgd_epsilon(sigma, q, steps, 1e-5) <= epsilon
    assert dpsgd_epsilon(0.99 * sigma, q, steps, 1e-5) > epsilon


def test_calibration_refuses_bad_input():
    with pytest.raises(ValueError, match="sampling_probability"):
        calibrate_noise_multiplier(1.0, 1e-5, 0.0, 10)
    with pytest.raises(ValueError, match="delta"):
        calibrate_noise_multiplier(1.0, 0.0, 0.1, 10)
    with pytest.raises(ValueError, match="epsilon"):
        calibrate_noise_multiplier(-1.0, 1e-5, 0.1, 10)


def test_ledger_epsilon_equals_dp_accounting_and_survives_json(tmp_path):
    ledger = PrivacyLedger(1000, DPSGD_RELATION)
    ledger.record(dpsgd_event(1.1, 0.05, 300), np.arange(1000), "dp-sgd", "dp-sgd")
    expected = dpsgd_epsilon(1.1, 0.05, 300, 1e-5)
    assert ledger.epsilon(1e-5) == pytest.approx(expected, rel=1e-9)
    ledger.save(tmp_path / "ledger.json", 1e-5)
    loaded = PrivacyLedger.load(tmp_path / "ledger.json")
    assert loaded.neighboring_relation == DPSGD_RELATION
    assert loaded.epsilon(1e-5) == pytest.approx(expected, rel=1e-9)
    assert json.loads((tmp_path / "ledger.json").read_text())["neighboring_relation"] == "ADD_OR_REMOVE_ONE"
    with pytest.raises(ValueError, match="replace-one"):
        ledger.record(randomized_response_event(1.0, 10), np.arange(3), "label RR on a full-DP ledger")


@pytest.mark.parametrize("method", ["auto", "fast", "vmap"])
def test_batchnorm_is_refused_with_a_fix(method):
    model = nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.Flatten(), nn.Linear(4 * 26 * 26, 2))
    x, y = torch.randn(2, 1, 28, 28), torch.tensor([0, 1])
    with pytest.raises(UnsupportedModelError, match="GroupNorm"):
        clipped_gradient_sum(model, x, y, 1.0, method=method)
    fixed = replace_batchnorm(model)
    assert isinstance(fixed[1], nn.GroupNorm) and fixed[1].num_channels == 4
    clipped_gradient_sum(fixed, x, y, 1.0, method=method)


def test_fast_path_refuses_what_it_cannot_do_and_auto_falls_back():
    model = nn.Sequential(nn.Conv2d(2, 4, 3, groups=2), nn.Flatten(), nn.Linear(4 * 4 * 4, 3))
    x, y = torch.randn(3, 2, 6, 6), torch.tensor([0, 1, 2])
    with pytest.raises(UnsupportedModelError, match="groups"):
        clipped_gradient_sum(model, x, y, 1.0, method="fast")
    expected, _ = loop_reference(model, x, y, 0.1)
    for ours, reference in zip(clipped_gradient_sum(model, x, y, 0.1, method="auto").sums, expected):
        torch.testing.assert_close(ours, reference)
    shared = nn.Linear(4, 4)
    reused = nn.Sequential(shared, nn.Tanh(), shared)
    with pytest.raises(UnsupportedModelError, match="more than once"):
        clipped_gradient_sum(reused, torch.randn(2, 4), torch.tensor([0, 1]), 1.0, method="fast")


@pytest.mark.parametrize("device", DEVICES)
def test_trainer_learns_resumes_and_keeps_an_ema(tmp_path, device):
    torch.set_default_dtype(torch.float32)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, 10)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64)
    config = TrainConfig(epochs=4, batch_size=40, lr=0.5, weight_decay=0.0, augment=False)
    dp = DPSGDConfig(max_grad_norm=1.0, ema_decay=0.9, physical_batch_size=16)

    def fresh():
        torch.manual_seed(0)
        return nn.Sequential(nn.Linear(10, 16), nn.Tanh(), nn.Linear(16, 2)).to(device)

    noise = NoiseSource(insecure_seed=1)  # reproducible noise, so that the resumed run can be compared
    full_model = fresh()
    evaluated, history = train_dpsgd(
        full_model, x, y, config, dp, 0.5, test=(x, y), seed=1, noise=noise, progress=False
    )
    assert history[-1].test_accuracy > 0.85
    assert any(not torch.equal(a, b) for a, b in zip(evaluated.parameters(), full_model.parameters()))

    # interrupted after two epochs, then resumed: identical to the uninterrupted run
    class Crash(Exception):
        pass

    def crash_after_two(record):
        if record.epoch == 2:
            raise Crash

    path = tmp_path / "checkpoint.pt"
    with pytest.raises(Crash):
        train_dpsgd(
            fresh(),
            x,
            y,
            config,
            dp,
            0.5,
            seed=1,
            noise=noise,
            checkpoint=path,
            progress=False,
            on_epoch_end=crash_after_two,
        )
    saved = torch.load(path, weights_only=False)
    assert all(row["train_loss"] is None for row in saved["history"])  # no loss on true labels is written
    assert set(saved) == {"model", "optimizer", "scheduler", "ema", "history"}  # no noise or sampling state
    resumed, _ = train_dpsgd(fresh(), x, y, config, dp, 0.5, seed=1, noise=noise, checkpoint=path, progress=False)
    for a, b in zip(resumed.parameters(), evaluated.parameters()):
        torch.testing.assert_close(a, b)


def test_trainer_averages_augmented_views():
    torch.set_default_dtype(torch.float32)
    x = np.random.default_rng(0).normal(size=(32, 1, 8, 8)).astype(np.float32)
    y = np.arange(32) % 2
    config = TrainConfig(epochs=1, batch_size=8, lr=0.1, weight_decay=0.0)

    def trained(augmult: int) -> list[torch.Tensor]:
        torch.manual_seed(0)
        model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.Flatten(), nn.Linear(256, 2))
        evaluated, _ = train_dpsgd(
            model,
            x,
            y,
            config,
            DPSGDConfig(augmult=augmult, ema_decay=0.0),
            0.5,
            augmentation="translate",
            seed=3,
            noise=NoiseSource(insecure_seed=3),
            progress=False,
        )
        return [p.detach().clone() for p in evaluated.parameters()]

    two_views = trained(2)
    assert all(torch.equal(a, b) for a, b in zip(two_views, trained(2)))  # seeded: reproducible
    assert any(not torch.equal(a, b) for a, b in zip(two_views, trained(1)))  # other views, another step


@pytest.mark.parametrize("device", DEVICES)
def test_ema_follows_its_warm_up_formula(device):
    """The t-th update (t = 0, 1, ...) is ema <- rate ema + (1 - rate) w with rate = min(decay, (1+t)/(10+t))."""
    model = nn.Linear(3, 2).to(device)
    ema = AveragedModel(model, multi_avg_fn=_ema_with_warmup(0.5), use_buffers=True)
    expected = [p.detach().clone() for p in model.parameters()]  # the first update copies
    for t in range(5):
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn_like(p))
        ema.update_parameters(model)
        if t > 0:
            rate = min(0.5, (1 + t) / (10 + t))
            expected = [rate * e + (1 - rate) * p.detach() for e, p in zip(expected, model.parameters())]
        else:
            expected = [p.detach().clone() for p in model.parameters()]
    for got, want in zip(ema.module.parameters(), expected):
        torch.testing.assert_close(got, want)


def test_dpsgd_run_records_its_event_before_training(tmp_path):
    torch.set_default_dtype(torch.float32)
    config = RunConfig(
        dataset="digits",
        method="dp-sgd",
        epsilon=2.0,
        model="mlp",
        train=TrainConfig(epochs=2, batch_size=64, lr=0.5, weight_decay=0.0),
    )
    summary = train_run(config, tmp_path / "run", progress=False)
    assert summary["epsilon"] == pytest.approx(2.0, abs=0.01) and summary["epsilon"] <= 2.0
    assert summary["delta"] == 1e-5 and summary["neighboring_relation"] == "add-or-remove one example"
    assert summary["test_accuracy"] > 0.3
    ledger = PrivacyLedger.load(tmp_path / "run" / "ledger.json")
    assert ledger.neighboring_relation == DPSGD_RELATION and [e.tag for e in ledger.entries] == ["dp-sgd"]
    assert ledger.epsilon(1e-5) == pytest.approx(
        dpsgd_epsilon(summary["noise_multiplier"], summary["sampling_probability"], summary["steps"], 1e-5)
    )


def test_dpsgd_config_errors_before_any_spend(tmp_path):
    with pytest.raises(ValueError, match="delta applies only"):
        RunConfig(method="lp-1st", epsilon=1.0, delta=1e-5).resolved()
    with pytest.raises(ValueError, match="mixup"):
        RunConfig(method="dp-sgd", epsilon=1.0, train=TrainConfig(mixup_alpha=1.0)).resolved()
    with pytest.raises(ValueError, match="amp"):
        RunConfig(method="dp-sgd", epsilon=1.0, train=TrainConfig(amp=True)).resolved()
    with pytest.raises(ValueError, match="amp"):
        train_dpsgd(
            nn.Linear(4, 2),
            np.zeros((8, 4), np.float32),
            np.zeros(8, np.int64),
            TrainConfig(batch_size=4, amp=True),
            DPSGDConfig(),
            1.0,
            progress=False,
        )
    with pytest.raises(ValueError, match="max_grad_norm"):
        RunConfig(method="dp-sgd", epsilon=1.0, dpsgd=DPSGDConfig(max_grad_norm=0)).resolved()
    with pytest.raises(ValueError, match="augmult"):
        RunConfig(
            method="dp-sgd", epsilon=1.0, train=TrainConfig(augment=False), dpsgd=DPSGDConfig(augmult=2)
        ).resolved()
    with pytest.raises(ValueError, match="batch_size"):
        train_run(
            RunConfig(method="dp-sgd", epsilon=1.0, train=TrainConfig(batch_size=5000)), tmp_path / "r", progress=False
        )
    with pytest.raises(ValueError, match="no augmentation"):  # the digits have none
        train_run(RunConfig(method="dp-sgd", epsilon=1.0, dpsgd=DPSGDConfig(augmult=2)), tmp_path / "a", progress=False)
    with pytest.raises(ValueError, match="augmult"):
        train_dpsgd(
            nn.Linear(4, 2),
            np.zeros((8, 4), np.float32),
            np.zeros(8, np.int64),
            TrainConfig(batch_size=4),
            DPSGDConfig(augmult=2),
            1.0,
            augmentation="none",
            progress=False,
        )
    given = RunConfig(
        method="dp-sgd",
        epsilon=1.0,
        model="mlp",
        train=TrainConfig(epochs=1, batch_size=64),
        dpsgd=DPSGDConfig(noise_multiplier=0.8),
    )
    with pytest.raises(ValueError, match="more than the budget"):  # sigma 0.8 spends epsilon ~3.3 here
        train_run(given, tmp_path / "s", progress=False)
    # nothing was written: the same folder takes the corrected run
    assert not any((tmp_path / name).exists() for name in ("r", "a", "s"))
    torch.set_default_dtype(torch.float32)  # as the CLI trains
    summary = train_run(dataclasses.replace(given, epsilon=5.0), tmp_path / "s", progress=False)
    assert 2 < summary["epsilon"] <= 5


def test_an_examples_augmentation_does_not_depend_on_its_batch():
    """DP-SGD's augmentation stream is public (the seed): an example's view must be a function of its
    own index, or adding another example to a Poisson batch would change the others' gradients too."""
    from labeldp.training.augment import augment

    images = torch.randn(10, 3, 8, 8)

    def views(indices: list[int]) -> torch.Tensor:
        generator = torch.Generator().manual_seed(3)
        return augment(images[indices], "crop-flip", generator, torch.tensor(indices), len(images))

    alone, shared = views([5]), views([1, 5, 7])
    assert torch.equal(alone[0], shared[1])
    assert not all(torch.equal(views([i])[0], images[i]) for i in range(10))  # it does augment
