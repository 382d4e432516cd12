"""ALIBI: Laplace noise on the one-hot label, its exact distribution, epsilon, likelihood and runs."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from labeldp.accounting import PrivacyLedger, laplace_one_hot_event, release_laplace_one_hot
from labeldp.mechanisms import laplace, laplace_one_hot, laplace_one_hot_likelihood, laplace_scale
from labeldp.randomness import SecureGenerator
from labeldp.training import RunConfig, TrainConfig, train_run


@pytest.mark.parametrize("rng", [0, "secure"])
def test_noise_is_laplace_around_the_one_hot_vector(rng):
    epsilon, labels = 1.5, np.array([2, 0, 1] * 4000)
    noisy = laplace_one_hot(labels, 3, epsilon, rng)
    noise = noisy - np.eye(3)[labels]
    b = 2 / epsilon
    assert stats.kstest(noise.ravel(), stats.laplace(scale=b).cdf).pvalue > 1e-4
    # coordinates are independent: the correlation between two coordinates is ~0
    assert abs(np.corrcoef(noise[:, 0], noise[:, 1])[0, 1]) < 5 / math.sqrt(len(labels))


def test_distribution_test_has_power():
    """The KS test above rejects noise whose scale is 10% too small (epsilon claimed too high)."""
    noise = laplace(0.9 * laplace_scale(1.5), 36000, rng=1)
    assert stats.kstest(noise, stats.laplace(scale=laplace_scale(1.5)).cdf).pvalue < 1e-4


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 4.0])
def test_likelihood_ratio_is_bounded_by_e_epsilon_and_tight(epsilon):
    """Pr[z | y] / Pr[z | y'] <= e^eps at every output z, with equality approached."""
    z = laplace(3.0, (20000, 4), rng=2) + 0.5
    likelihood = laplace_one_hot_likelihood(z, epsilon)
    log_ratios = np.log(likelihood[:, :, None]) - np.log(likelihood[:, None, :])
    assert log_ratios.max() <= epsilon + 1e-9
    assert log_ratios.max() > 0.999 * epsilon


def test_likelihood_is_the_exact_density_ratio():
    epsilon, b = 2.0, 1.0
    z = np.array([[0.3, -1.2, 2.5]])
    dens = [np.prod(stats.laplace(scale=b).pdf(z[0] - np.eye(3)[y])) for y in range(3)]
    np.testing.assert_allclose(laplace_one_hot_likelihood(z, epsilon)[0], np.array(dens) / sum(dens))


def test_secure_generator_draws_laplace():
    sample = laplace(1.0, 20000, SecureGenerator())
    assert stats.kstest(sample, stats.laplace().cdf).pvalue > 1e-4


def test_release_records_epsilon_on_the_ledger():
    ledger = PrivacyLedger(10)
    noisy = release_laplace_one_hot(ledger, np.arange(10) % 3, np.arange(10), 3, 0.8, rng=0, tag="alibi")
    assert noisy.shape == (10, 3)
    assert ledger.epsilon() == pytest.approx(0.8, abs=1e-3)
    assert ledger.epsilon() >= 0.8 - 1e-9
    assert laplace_one_hot_event(0.8).count == 2
    with pytest.raises(ValueError, match="epsilon"):
        release_laplace_one_hot(ledger, np.zeros(10, int), np.arange(10), 3, 0.0)


def test_alibi_run_on_digits(tmp_path):
    config = RunConfig(dataset="digits", method="alibi", epsilon=4.0, train=TrainConfig(epochs=20, batch_size=32,
                                                                                         lr=0.02, weight_decay=1e-3))
    summary = train_run(config, tmp_path / "run", progress=False)
    assert summary["epsilon"] == pytest.approx(4.0, abs=1e-3)
    assert summary["test_accuracy"] > 0.6
    with pytest.raises(ValueError, match="alibi"):
        RunConfig(method="alibi", epsilon=1.0, loss="ce").resolved()
