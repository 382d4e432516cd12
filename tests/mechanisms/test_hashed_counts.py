"""Noisy label counts over hashed features: the noise's exact distribution, the exact L1 sensitivity for
every privacy unit, the e^epsilon likelihood-ratio bound, and the streamed release through the boundary."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from labeldp.accounting import PrivacyLedger, hashed_counts_event
from labeldp.boundary import PrivateLabels, release_hashed_counts
from labeldp.errors import ConfigError
from labeldp.mechanisms import discrete_laplace_pmf
from labeldp.mechanisms import hashed_counts as mechanism
from labeldp.mechanisms.hashed_counts import CountAccumulator, hashed_sensitivity, noisy_hashed_counts
from tests.helpers import frequencies_match

SLACK = 1e-3


def _counts(labels: np.ndarray, buckets: np.ndarray, num_buckets: int, num_classes: int = 2) -> np.ndarray:
    accumulator = CountAccumulator(num_buckets, buckets.shape[1], num_classes)
    accumulator.add(labels, buckets)
    return accumulator.counts


def _data(rows: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    buckets = np.stack([rng.integers(0, 4, rows), 4 + rng.integers(0, 3, rows), 7 + rng.integers(0, 5, rows)], 1)
    return rng.integers(0, 2, rows), buckets  # 3 slots, 12 buckets


@pytest.mark.parametrize("num_classes, contribution", [(2, 1), (2, 2), (3, 1)])
def test_noise_matches_its_exact_distribution(num_classes: int, contribution: int) -> None:
    """Parameter epsilon / (F c) on the positive counts (two classes; the negatives are the size minus
    them), epsilon / (2 F c) on every cell (more classes)."""
    labels, buckets = _data(30, 0)
    labels = labels if num_classes == 2 else np.random.default_rng(1).integers(0, 3, 30)
    exact = _counts(labels, buckets, 12, num_classes)
    epsilon, width = 3.0, 12
    draws = np.stack([noisy_hashed_counts(exact, 3, epsilon, s, contribution) for s in range(3000)])
    noise = (draws - exact)[:, :, 1 if num_classes == 2 else slice(None)].reshape(len(draws), -1)
    parameter = epsilon / hashed_sensitivity(3, num_classes, contribution)
    assert parameter == epsilon / (3 * contribution * (1 if num_classes == 2 else 2))
    expected = discrete_laplace_pmf(np.arange(-width, width + 1), parameter)
    expected[0] = expected[-1] = 0.5 * (1 - expected[1:-1].sum())  # the edge cells collect the tails
    assert frequencies_match(np.clip(noise, -width, width) + width, np.tile(expected, (noise.shape[1], 1))).all()
    wrong = discrete_laplace_pmf(np.arange(-width, width + 1), parameter * 1.5)
    wrong[0] = wrong[-1] = 0.5 * (1 - wrong[1:-1].sum())
    assert not frequencies_match(np.clip(noise, -width, width) + width, np.tile(wrong, (noise.shape[1], 1))).all()
    if num_classes == 2:
        assert np.all(draws.sum(axis=2) == exact.sum(axis=1))  # every bucket's counts sum to its public size


def test_the_sensitivity_is_exact_for_every_unit() -> None:
    """Changing every label of a unit of r rows moves the positive counts by at most F r in L1, and by
    exactly F r when they all change the same way: F c, c the largest unit, is the exact sensitivity.
    Two slots of a row in one bucket move it twice, and the L1 bound still holds."""
    labels, buckets = _data(40, 2)
    buckets[0, 2] = buckets[0, 1]  # a collision inside one row
    units = np.random.default_rng(3).integers(0, 9, 40)
    before = _counts(labels, buckets, 12)[:, 1]
    largest = np.bincount(units).max()
    rng = np.random.default_rng(4)
    for unit in range(9):
        rows = np.flatnonzero(units == unit)
        for changed in [np.zeros(rows.size, int), np.ones(rows.size, int), *rng.integers(0, 2, (5, rows.size))]:
            other = labels.copy()
            other[rows] = changed
            moved = np.abs(_counts(other, buckets, 12)[:, 1] - before).sum()
            assert moved <= 3 * rows.size <= hashed_sensitivity(3, 2, largest)
        ones, zeros = labels.copy(), labels.copy()
        ones[rows], zeros[rows] = 1, 0
        assert np.abs(_counts(ones, buckets, 12)[:, 1] - _counts(zeros, buckets, 12)[:, 1]).sum() == 3 * rows.size


def test_a_units_labels_move_every_output_by_at_most_e_to_the_epsilon(monkeypatch) -> None:
    """Exact, on a table small enough to enumerate: the release's noise parameter is epsilon / (F c), and
    the probability of any output under two labellings of the largest unit differs by at most e^epsilon,
    attained where the output lies beyond both tables."""
    seen = {}
    real = mechanism.discrete_laplace

    def spy(parameter, shape, rng):
        seen["parameter"] = parameter
        return real(parameter, shape, rng)

    monkeypatch.setattr(mechanism, "discrete_laplace", spy)
    buckets = np.array([[0, 2], [1, 2], [0, 3]])  # F = 2 slots over buckets {0, 1} and {2, 3}
    units = np.array([0, 0, 1])  # c = 2
    epsilon = 1.3
    ledger = PrivacyLedger(3, units=units)
    block = (np.arange(3), buckets, PrivateLabels.from_indices([1, 0, 1], 2))
    release = release_hashed_counts(ledger, [block], np.arange(3), 4, 2, 2, epsilon, 0, "counts")
    assert seen["parameter"] == pytest.approx(epsilon / 4)
    assert ledger.epsilon() == pytest.approx(epsilon, abs=SLACK) and ledger.row_epsilon() == pytest.approx(
        epsilon / 2, abs=SLACK
    )
    assert (
        release.aggregate and "up to 2 rows" in release.description and release.arrays["sizes"].tolist() == [2, 1, 2, 1]
    )
    outputs = np.array(list(itertools.product(range(-4, 7), repeat=4)))
    tables = [_counts(np.array([*labelling, 1]), buckets, 4)[:, 1] for labelling in itertools.product([0, 1], repeat=2)]
    worst = max(
        np.max(
            discrete_laplace_pmf(outputs - first, seen["parameter"]).prod(axis=1)
            / discrete_laplace_pmf(outputs - second, seen["parameter"]).prod(axis=1)
        )
        for first, second in itertools.product(tables, repeat=2)
    )
    assert math.exp(epsilon) * (1 - 1e-9) <= worst <= math.exp(epsilon) * (1 + 1e-9)


def test_the_ledger_charges_epsilon_for_any_width_and_unit() -> None:
    for slots, classes, contribution in [(7, 2, 1), (7, 2, 20), (40, 3, 5)]:
        ledger = PrivacyLedger(1)
        ledger.record(hashed_counts_event(0.7, slots, classes, contribution), np.array([True]), "counts")
        assert ledger.epsilon() == pytest.approx(0.7, abs=SLACK)


def test_the_streamed_release_counts_each_member_once() -> None:
    labels, buckets = _data(50, 5)
    members = np.flatnonzero(np.arange(50) % 5 != 0)
    blocks = [
        (
            np.arange(start, start + 10),
            buckets[start : start + 10],
            PrivateLabels.from_indices(labels[start : start + 10], 2),
        )
        for start in range(0, 50, 10)
    ]
    streamed = release_hashed_counts(PrivacyLedger(50), blocks, members, 12, 3, 2, 300.0, rng=0)
    one_block = [(np.arange(50), buckets, PrivateLabels.from_indices(labels, 2))]
    whole = release_hashed_counts(PrivacyLedger(50), one_block, members, 12, 3, 2, 300.0, rng=0)
    assert np.array_equal(streamed.arrays["counts"], whole.arrays["counts"])
    exact = _counts(labels[members], buckets[members], 12)
    assert np.array_equal(whole.arrays["counts"], exact)  # no noise at this epsilon
    ledger = PrivacyLedger(50)
    for bad, message in [
        (blocks + blocks[:1], "two blocks"),
        (blocks[:4], "never came"),
        ([(np.array([0, 0]), buckets[:2], one_block[0][2][:2])], "repeats a row"),
        ([(np.arange(50), buckets + 12, one_block[0][2])], "bucket"),
        ([(np.arange(50), buckets, PrivateLabels.from_indices(labels + 1, 3))], "labels must lie in"),
    ]:
        with pytest.raises(ConfigError, match=message):
            release_hashed_counts(ledger, iter(bad), np.arange(50), 12, 3, 2, 1.0)
    assert ledger.entries == ()  # nothing recorded, nothing drawn
