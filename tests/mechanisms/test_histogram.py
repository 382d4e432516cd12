"""The noisy histogram (mechanisms/histogram.py): the pmf ratio of neighbouring tables is within
e^eps, and counts are nearly exact at a large epsilon."""

from __future__ import annotations

import math

import numpy as np
import pytest

from labeldp.errors import ConfigError
from labeldp.mechanisms import discrete_laplace_pmf, noisy_histogram


@pytest.mark.parametrize("epsilon", [0.1, 1.0])
def test_histogram_likelihood_ratio_and_counts(epsilon: float) -> None:
    """Neighbouring label vectors move two cells by one: the pmf ratio of any noisy table is <= e^eps."""
    a = epsilon / 2
    values = np.arange(-30, 31)
    # cell A holds count c or c+1, cell B holds c'+1 or c'; noise independent per cell
    ratio = (discrete_laplace_pmf(values[:, None] - 1, a) * discrete_laplace_pmf(values[None, :], a)) / (
        discrete_laplace_pmf(values[:, None], a) * discrete_laplace_pmf(values[None, :] - 1, a)
    )
    assert ratio.max() == pytest.approx(math.exp(epsilon))
    labels = np.array([0, 1, 1, 2, 2, 2])
    groups = np.array([0, 0, 1, 1, 1, 0])
    draws = np.stack([noisy_histogram(labels, groups, 2, 3, 50.0, rng=s) for s in range(20)])
    assert np.all(draws == np.array([[1, 1, 1], [0, 1, 2]]))  # nearly noiseless at epsilon 50


def test_a_histogram_has_at_least_one_group() -> None:
    with pytest.raises(ConfigError, match="num_groups must be at least 1"):
        noisy_histogram([0, 1], [0, 0], 0, 2, 1.0, rng=0)
