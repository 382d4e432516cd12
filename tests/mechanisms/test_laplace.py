"""ALIBI's mechanism (mechanisms/laplace.py): discrete Laplace noise on the grid around the one-hot
label, its exact distribution, the likelihood and its e^eps bound, and the floating-point attack it
resists."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from labeldp.audit import clopper_pearson_lower
from labeldp.mechanisms import (
    LAPLACE_GRID,
    discrete_laplace,
    discrete_laplace_pmf,
    keep_probability,
    laplace_one_hot,
    laplace_one_hot_likelihood,
    laplace_parameter,
)


def _binned_chi_square_pvalue(samples: np.ndarray, parameter: float, bins: int = 40) -> float:
    """Chi-square test of integer samples against the discrete Laplace pmf, in bins of about equal
    exact mass (bin i holds the values in (edges[i-1], edges[i]])."""
    support = np.arange(-int(40 / parameter), int(40 / parameter) + 1)
    cdf = np.cumsum(discrete_laplace_pmf(support, parameter))
    edges = np.unique(support[np.searchsorted(cdf, np.linspace(0, 1, bins + 1)[1:-1])])
    observed = np.bincount(np.searchsorted(edges, samples, side="left"), minlength=edges.size + 1)
    mass = np.diff(np.concatenate([[0.0], cdf[np.searchsorted(support, edges)], [1.0]]))
    return stats.chisquare(observed, mass * samples.size).pvalue


@pytest.mark.parametrize("rng", [0, "secure"])
def test_noise_is_discrete_laplace_on_the_grid_around_the_one_hot_vector(rng):
    epsilon, labels = 1.5, np.array([2, 0, 1] * 4000)
    noisy = laplace_one_hot(labels, 3, epsilon, rng)
    scaled = (noisy - np.eye(3)[labels]) * LAPLACE_GRID
    assert np.array_equal(scaled, np.round(scaled))  # every coordinate lies on the grid (1/m) Z
    # fresh secure draws on every run: a correct sampler fails this level once in a million runs
    assert _binned_chi_square_pvalue(scaled.astype(np.int64).ravel(), laplace_parameter(epsilon)) > 1e-6
    # coordinates are independent: the correlation between two coordinates is ~0
    assert abs(np.corrcoef(scaled[:, 0], scaled[:, 1])[0, 1]) < 5 / math.sqrt(len(labels))


def test_distribution_test_has_power():
    """The chi-square test above rejects noise whose scale is 10% too small (epsilon claimed too high)."""
    noise = discrete_laplace(laplace_parameter(1.5) / 0.9, 36000, rng=1)
    assert _binned_chi_square_pvalue(noise, laplace_parameter(1.5)) < 1e-6


def test_mironov_grid_attack_gains_nothing():
    """Mironov (2012): a coordinate computed as fl(1 + L) always satisfies (z - 1) + 1 == z in floating
    point, while a coordinate fl(L) of continuous noise often does not. An attacker who answers only
    the releases where exactly that one coordinate passes learns the true label every time from
    continuous noise. On labeldp's grid every coordinate passes: the attacker never gets to answer, and
    whatever it guesses is right no more often than epsilon allows."""
    epsilon, n = 1.0, 200_000
    labels = np.random.default_rng(0).integers(0, 2, n)
    released = laplace_one_hot(labels, 2, epsilon, rng=1)
    passes = (released - 1.0) + 1.0 == released
    singled_out = passes.sum(axis=1) == 1
    guesses = passes.argmax(axis=1)
    answered, correct = int(singled_out.sum()), int((guesses == labels)[singled_out].sum())
    assert answered == 0 or clopper_pearson_lower(correct, answered, 1e-6) <= keep_probability(epsilon, 2)
    # the fallback guess, the larger coordinate, is right at most as often as epsilon-DP allows
    fallback = released.argmax(axis=1) == labels
    assert fallback.mean() <= keep_probability(epsilon, 2) + 5 * math.sqrt(0.25 / n)

    # the same attack on continuous Laplace noise added in floating point (ALIBI's original mechanism)
    noise = np.random.default_rng(2).laplace(scale=2 / epsilon, size=(n, 2))
    continuous = noise + np.eye(2)[labels]
    passes = (continuous - 1.0) + 1.0 == continuous
    singled_out = passes.sum(axis=1) == 1
    correct = int((passes.argmax(axis=1) == labels)[singled_out].sum())
    assert singled_out.sum() > 1000 and correct > 0.99 * singled_out.sum()  # the attack is real


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 4.0])
def test_likelihood_ratio_is_bounded_by_e_epsilon_and_tight(epsilon):
    """Pr[z | y] / Pr[z | y'] <= e^eps at every output z, with equality reached."""
    z = laplace_one_hot(np.zeros(20000, dtype=int), 4, 0.7, rng=2)
    likelihood = laplace_one_hot_likelihood(z, epsilon)
    log_ratios = np.log(likelihood[:, :, None]) - np.log(likelihood[:, None, :])
    assert log_ratios.max() <= epsilon + 1e-9
    assert log_ratios.max() > 0.999 * epsilon


def test_likelihood_is_the_exact_probability_ratio():
    epsilon = 2.0
    a = laplace_parameter(epsilon)
    z = np.array([[307, -1280, 2560]]) / LAPLACE_GRID
    scaled = np.round(z[0] * LAPLACE_GRID)
    exact = [np.prod(discrete_laplace_pmf(scaled - LAPLACE_GRID * np.eye(3)[y], a)) for y in range(3)]
    np.testing.assert_allclose(laplace_one_hot_likelihood(z, epsilon)[0], np.array(exact) / sum(exact), rtol=1e-9)
