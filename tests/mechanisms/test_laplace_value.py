"""The Laplace mechanism on a grid's lattice (mechanisms/laplace_value.py): its exact distribution,
its likelihood within e^eps, and an uneven grid or bad labels refused."""

from __future__ import annotations

import numpy as np
import pytest

from labeldp.accounting import PrivacyLedger
from labeldp.boundary import PrivateLabels, release_laplace_value
from labeldp.errors import ConfigError
from labeldp.mechanisms import laplace_value, laplace_value_likelihood, laplace_value_log_probabilities
from tests.helpers import frequencies_match

GRID = np.arange(1.0, 6.0)


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


def test_laplace_value_refuses_an_uneven_grid_and_bad_labels() -> None:
    with pytest.raises(ConfigError, match="evenly spaced"):
        laplace_value([0, 1], [0.0, 1.0, 3.0], 1.0)
    with pytest.raises(ConfigError, match="must lie in"):
        laplace_value([0, 5], GRID, 1.0)
    with pytest.raises(ConfigError, match="epsilon"):
        laplace_value([0, 1], GRID, 0.0)
    ledger = PrivacyLedger(2)
    with pytest.raises(ConfigError, match="evenly spaced"):
        release_laplace_value(ledger, PrivateLabels.from_indices([0, 1], 3), np.arange(2), [0.0, 1.0, 3.0], 1.0)
    assert not ledger.entries
