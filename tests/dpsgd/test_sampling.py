"""Poisson sampling (dpsgd/sampling.py): batch sizes are binomial, empty batches happen, inclusion
never exceeds the accounted rate, and the batches are secret (two runs with one seed draw different
ones unless the noise is seeded)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats
from torch import nn

from labeldp.boundary import PrivateLabels
from labeldp.config.dpsgd import DPSGDConfig
from labeldp.dpsgd import PoissonSampler
from labeldp.dpsgd.trainer import train_dpsgd
from labeldp.randomness import NoiseSource, SecureGenerator
from labeldp.training import TrainConfig

pytestmark = pytest.mark.usefixtures("float64")  # tests/dpsgd/conftest.py


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
    y = PrivateLabels.from_indices((x[:, 0] > 0).astype(np.int64), 2)
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
