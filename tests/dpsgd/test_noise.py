"""DP-SGD's noise (dpsgd/noise.py): the privatised gradient is the clipped sum plus N(0, (sigma C /
B)^2) per coordinate from every noise source, with no noise and no clipping plain SGD, an empty batch
pure noise, and the secure normals standard normal."""

from __future__ import annotations

import math

import pytest
import torch
from scipy import stats
from torch import nn

from labeldp.dpsgd import clipped_gradient_sum, clipping, gaussian_noise, privatize_gradients, secure_normal
from tests.dpsgd.reference import cases
from tests.helpers import DEVICES

pytestmark = pytest.mark.usefixtures("float64")  # tests/dpsgd/conftest.py


def test_no_noise_and_no_clipping_is_plain_sgd():
    model, x, y = cases()["cnn-inplace-relu"]
    nn.functional.cross_entropy(model(x), y).backward()
    plain = [p.grad.clone() for p in model.parameters()]
    clipped = clipped_gradient_sum(model, x, y, math.inf)
    privatize_gradients(model, clipped, 0.0, math.inf, expected_batch_size=len(x))
    for param, reference in zip(model.parameters(), plain):
        torch.testing.assert_close(param.grad, reference)


def test_empty_batch_gives_zero_sum_and_pure_noise():
    model, x, y = cases()["mlp"]
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
    # secure and fresh noise differ on every run: each check below fails a correct sampler once in a
    # million runs (at 1e-4 the two failed one run in 5,000 for each source and device)
    # (n - 1) s^2 / std^2 ~ chi2(n - 1): two-sided 1e-6 test
    statistic = (n - 1) * noise.var(ddof=1) / std**2
    assert stats.chi2.ppf(5e-7, n - 1) < statistic < stats.chi2.ppf(1 - 5e-7, n - 1)
    assert stats.kstest(noise / std, "norm").pvalue > 1e-6


def test_noise_scale_test_has_power():
    """The variance check above rejects a noise standard deviation 10% too small."""
    noise = gaussian_noise(torch.zeros(10100), 0.9, torch.Generator().manual_seed(0)).numpy()
    statistic = (noise.size - 1) * noise.var(ddof=1)
    assert not stats.chi2.ppf(5e-7, noise.size - 1) < statistic  # its lower tail: about 1e-42


def test_secure_normal_is_standard_normal():
    sample = secure_normal((20000,), dtype=torch.float64).numpy()
    assert stats.kstest(sample, "norm").pvalue > 1e-6  # fresh secure draws: fails once in a million runs
    with pytest.raises(ValueError, match="generator"):
        gaussian_noise(torch.zeros(3), 1.0, "urandom")
