"""Noisy label marginals (mechanisms/label_marginals.py): the noise's exact distribution (and a check that
rejects a wrong scale), and every replaced label moves the cells the noise is calibrated to."""

from __future__ import annotations

import numpy as np
import pytest

from labeldp.mechanisms import discrete_laplace_pmf, noisy_marginals
from labeldp.mechanisms.label_marginals import marginal_counts, moved_cells
from tests.helpers import frequencies_match

LABELS = np.array([0, 1, 1, 0, 1, 1])
BINS = np.array([[0, 1], [1, 0], [1, 1], [0, 0], [0, 1], [1, 2]])  # two features, with 2 and 3 bins
SIZES = [2, 3]


@pytest.mark.parametrize("num_classes", [2, 3])
def test_noise_matches_its_exact_distribution(num_classes: int) -> None:
    """Two classes: the positive count of every bin gets discrete Laplace(eps / B) and the negatives
    are the bin's size minus it; more classes: every cell gets discrete Laplace(eps / 2B)."""
    epsilon, features = 2.0, len(SIZES)
    labels = LABELS if num_classes == 2 else np.array([0, 1, 2, 0, 2, 1])
    exact = noisy_marginals(labels, BINS, SIZES, num_classes, 1e6, rng=0)  # noiseless at this epsilon
    draws = np.stack([noisy_marginals(labels, BINS, SIZES, num_classes, epsilon, rng=s) for s in range(4000)])
    parameter = epsilon / (features if num_classes == 2 else 2 * features)
    noise = (draws - exact)[:, :, 1 if num_classes == 2 else slice(None)].reshape(len(draws), -1)
    width = 12
    expected = discrete_laplace_pmf(np.arange(-width, width + 1), parameter)
    expected[0] = expected[-1] = 0.5 * (1 - expected[1:-1].sum())  # the edge cells collect the tails
    assert frequencies_match(np.clip(noise, -width, width) + width, np.tile(expected, (noise.shape[1], 1))).all()
    if num_classes == 2:
        assert np.all(draws.sum(axis=2) == exact.sum(axis=1))  # every bin's counts sum to its public size
        positives, sizes = np.array([1, 3, 1, 2, 1]), np.array([3, 3, 2, 3, 1])  # counted by hand
        assert np.array_equal(exact, np.stack([sizes - positives, positives], axis=1))


def test_the_check_rejects_a_wrong_scale() -> None:
    exact = noisy_marginals(LABELS, BINS, SIZES, 2, 1e6, rng=0)
    draws = np.stack([noisy_marginals(LABELS, BINS, SIZES, 2, 2.6, rng=s) for s in range(4000)])
    noise = (draws - exact)[:, :, 1]
    expected = discrete_laplace_pmf(np.arange(-12, 13), 1.0)
    expected[0] = expected[-1] = 0.5 * (1 - expected[1:-1].sum())
    assert not frequencies_match(np.clip(noise, -12, 12) + 12, np.tile(expected, (noise.shape[1], 1))).all()


@pytest.mark.parametrize("num_classes", [2, 3])
def test_every_replaced_label_moves_the_cells_the_noise_is_calibrated_to(num_classes: int) -> None:
    """The noise's parameter is epsilon / moved_cells (checked above); the table is epsilon-DP because
    replacing any one label, by any other, moves at most that many cells, each by one."""
    rng = np.random.default_rng(0)
    bins = np.stack([rng.integers(0, 4, 40), rng.integers(0, 2, 40), rng.integers(0, 7, 40)], axis=1)
    labels = rng.integers(0, num_classes, 40)
    exact = marginal_counts(labels, bins, [4, 2, 7], num_classes)
    released_cells = exact[:, 1] if num_classes == 2 else exact  # two classes: the positives only
    for row in range(len(labels)):
        for other in set(range(num_classes)) - {labels[row]}:
            changed = labels.copy()
            changed[row] = other
            after = marginal_counts(changed, bins, [4, 2, 7], num_classes)
            moved = np.abs((after[:, 1] if num_classes == 2 else after) - released_cells)
            assert moved.max() == 1 and moved.sum() == moved_cells(3, num_classes)
