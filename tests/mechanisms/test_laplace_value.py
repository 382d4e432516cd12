"""Numeric labels at the boundary: the Laplace mechanism on a grid's lattice (exact distribution,
e^eps bound, event) and the RR-on-bins release (its event over the smallest d, its channel and maps)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from labeldp.accounting import PrivacyLedger, laplace_value_event, rr_on_sets_event
from labeldp.boundary import release_laplace_value, release_rr_on_bins
from labeldp.errors import ConfigError
from labeldp.mechanisms import (
    grid_step,
    laplace_value,
    laplace_value_likelihood,
    laplace_value_log_probabilities,
    optimal_bins,
    released_values,
    rr_on_bins_probabilities,
)
from labeldp.randomness import SecureGenerator
from tests.helpers import frequencies_match

GRID = np.arange(1.0, 6.0)
PRIOR = np.array([0.06, 0.11, 0.27, 0.34, 0.22])


def exact_window(grid: np.ndarray, epsilon: float, low: int, high: int) -> np.ndarray:
    """Pr[z | y] for z in [low, high) and the two tails (z < low, z >= high): (G, high - low + 2)."""
    z = np.arange(low, high)
    log_p = laplace_value_log_probabilities(z, grid, epsilon).T  # (G, window)
    inside = np.exp(log_p)
    a = epsilon / (grid.size - 1)
    y = np.arange(grid.size)[:, None]
    below = np.exp(-a * (y - low + 1)) / (1 + np.exp(-a))  # Pr[X <= low - 1 - y], low - 1 - y <= -1
    above = np.exp(-a * (high - y)) / (1 + np.exp(-a))  # Pr[X >= high - y], high - y >= 1
    return np.concatenate([below, inside, above], axis=1)


@pytest.mark.parametrize("epsilon", [0.5, 2.0, 8.0])
def test_laplace_value_matches_its_exact_distribution(epsilon: float) -> None:
    draws, low, high = 40_000, -8, 13
    labels = np.repeat(np.arange(GRID.size), draws)
    z = laplace_value(labels, GRID, epsilon, rng=np.random.default_rng(int(epsilon * 10)))
    cells = np.clip(z - low + 1, 0, high - low + 1).reshape(GRID.size, draws).T  # (draws, G): 0 = below window
    expected = exact_window(GRID, epsilon, low, high)
    assert np.allclose(expected.sum(axis=1), 1.0)
    assert frequencies_match(cells, expected).all()
    assert not frequencies_match(cells, exact_window(GRID, epsilon * 0.9, low, high)).all()  # the test has power


@pytest.mark.parametrize("epsilon", [0.1, 1.0, 4.0, 30.0])
def test_laplace_value_likelihood_ratio_is_within_e_eps(epsilon: float) -> None:
    grid = np.linspace(0.0, 499.0, 50)
    z = np.arange(-200, 260)
    log_p = laplace_value_log_probabilities(z, grid, epsilon)
    ratio = log_p.max(axis=1) - log_p.min(axis=1)
    assert ratio.max() <= epsilon * (1 + 1e-12)
    assert ratio.max() >= epsilon * (1 - 1e-12)  # attained outside the range
    width = int(40 * (grid.size - 1) / epsilon)  # e^-40 of the mass lies beyond
    everywhere = np.arange(-width, grid.size + width)
    assert np.allclose(np.exp(laplace_value_log_probabilities(everywhere, grid, epsilon)).sum(axis=0), 1.0)
    likelihood = laplace_value_likelihood(z, grid, epsilon)
    assert np.allclose(likelihood.sum(axis=1), 1.0)
    normalised = np.exp(log_p - np.log(np.exp(log_p).sum(axis=1, keepdims=True)))
    assert np.allclose(likelihood, normalised)


def test_laplace_value_release_is_exact_and_recorded() -> None:
    grid = np.linspace(0.0, 10.0, 41)  # step 0.25
    assert grid_step(grid) == 0.25
    ledger = PrivacyLedger(300)
    labels = np.arange(300) % grid.size
    release = release_laplace_value(ledger, labels, np.arange(300), grid, 2.0, SecureGenerator(), "stage1")
    steps = release.arrays["noisy_steps"]
    assert steps.dtype.kind == "i" and not np.array_equal(steps, labels)
    assert np.array_equal(release.arrays["values"], steps * 0.25)  # on the lattice, exactly
    assert np.array_equal(released_values(steps, grid), release.arrays["values"])
    assert release.event == laplace_value_event(2.0, 40) and release.event.sensitivity == 40
    assert ledger.epsilon() == pytest.approx(2.0, abs=1e-3)
    assert release.likelihood.shape == (300, 41) and np.array_equal(release.labels, np.clip(steps, 0, 40))


def test_laplace_value_refuses_an_uneven_grid_and_bad_labels() -> None:
    with pytest.raises(ConfigError, match="evenly spaced"):
        laplace_value([0, 1], [0.0, 1.0, 3.0], 1.0)
    with pytest.raises(ConfigError, match="must lie in"):
        laplace_value([0, 5], GRID, 1.0)
    with pytest.raises(ConfigError, match="epsilon"):
        laplace_value([0, 1], GRID, 0.0)
    ledger = PrivacyLedger(2)
    with pytest.raises(ConfigError, match="evenly spaced"):
        release_laplace_value(ledger, [0, 1], np.arange(2), [0.0, 1.0, 3.0], 1.0)
    assert not ledger.entries


def test_rr_on_bins_release_records_rr_over_the_smallest_d() -> None:
    rng = np.random.default_rng(0)
    n, epsilon = 400, 2.0
    labels = rng.integers(0, 5, n)
    priors = np.vstack([PRIOR, np.eye(5)[3], rng.dirichlet(np.ones(5), n - 2)])  # row 1: a point mass, d = 1
    ledger = PrivacyLedger(n)
    release = release_rr_on_bins(ledger, labels, np.arange(n), GRID, priors, epsilon, rng, "stage1")
    maps = optimal_bins(priors, GRID, epsilon)
    d = release.arrays["k"]
    assert np.array_equal(d, maps.d) and d[1] == 1 and d.max() >= 2
    assert release.event == rr_on_sets_event(epsilon, d)
    assert release.event.num_buckets == d[d >= 2].min()
    assert ledger.epsilon() == pytest.approx(epsilon, abs=1e-3)
    assert np.array_equal(release.arrays["bin_of"], maps.bin_of)
    assert np.array_equal(release.arrays["values"], maps.values[np.arange(n), release.labels])
    probabilities = rr_on_bins_probabilities(maps, GRID, epsilon)  # (n, G, G)
    assert np.allclose(release.likelihood, probabilities[np.arange(n), :, release.labels])
    assert release.arrays["values"][1] == 4.0  # the point mass releases its value


def test_rr_on_bins_release_with_shared_rows_and_constant_maps() -> None:
    ledger = PrivacyLedger(6)
    rows = np.vstack([PRIOR, np.eye(5)[0]])
    groups = np.array([0, 0, 1, 1, 0, 1])
    release = release_rr_on_bins(ledger, [0, 1, 2, 3, 4, 0], np.arange(6), GRID, rows, 1.0, 0, "s", groups)
    assert np.array_equal(release.arrays["k"][groups == 1], [1, 1, 1])
    assert np.all(release.arrays["values"][groups == 1] == 1.0)
    assert np.array_equal(release.arrays["bin_of"][2], [0, 0, 0, 0, 0])
    assert release.event.num_buckets == release.arrays["k"][0]
    only_constant = PrivacyLedger(2)
    release = release_rr_on_bins(only_constant, [0, 4], np.arange(2), GRID, np.eye(5)[2], 1.0, 0, "c")
    assert type(release.event).__name__ == "NoOpDpEvent" and only_constant.epsilon() == 0.0
    assert math.isclose(rr_on_sets_event(1.0, [1, 3, 2]).noise_parameter, 2 / (math.e + 1))


def test_rr_on_bins_release_refuses_bad_input_before_recording() -> None:
    ledger = PrivacyLedger(3)
    with pytest.raises(ConfigError, match="length mismatch"):
        release_rr_on_bins(ledger, [0, 1, 2], np.arange(3), GRID, np.tile(PRIOR, (2, 1)), 1.0)
    with pytest.raises(ConfigError, match="must lie in"):
        release_rr_on_bins(ledger, [0, 1, 7], np.arange(3), GRID, PRIOR, 1.0)
    with pytest.raises(ConfigError, match="strictly increasing"):
        release_rr_on_bins(ledger, [0, 1, 2], np.arange(3), GRID[::-1], PRIOR, 1.0)
    assert not ledger.entries
