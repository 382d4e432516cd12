"""The release boundary (boundary/release.py): each release validates its input before it spends,
records exactly its members and event on the ledger (RR, ALIBI's noisy one-hot vector, the noisy
histogram and marginals, PATE's answers, the Laplace value and RR-on-bins of numeric labels), and a
non-private release is accounted as infinite epsilon."""

from __future__ import annotations

import math

import numpy as np
import pytest

from labeldp.accounting import PrivacyLedger, laplace_one_hot_event, pate_event, randomized_response_event
from labeldp.boundary import (
    release_label_marginals,
    release_laplace_one_hot,
    release_noisy_histogram,
    release_pate_labels,
    release_randomized_response,
    release_rr_with_prior,
    release_true_labels,
)
from labeldp.errors import ConfigError
from labeldp.mechanisms import LAPLACE_GRID


def test_non_private_release_is_infinite_epsilon() -> None:
    ledger = PrivacyLedger(10)
    labels = release_true_labels(ledger, np.arange(10) % 3, np.arange(10), 3).labels
    assert np.array_equal(labels, np.arange(10) % 3)
    assert ledger.epsilon() == math.inf


def test_release_validates_before_spending() -> None:
    ledger = PrivacyLedger(10)
    with pytest.raises(ValueError, match="labels must lie in"):
        release_randomized_response(ledger, [0, 12], [0, 1], 10, 1.0)
    with pytest.raises(ValueError, match="members must be indices"):
        release_randomized_response(ledger, [0, 1], [0, 10], 10, 1.0)
    with pytest.raises(ValueError, match="length mismatch"):
        release_randomized_response(ledger, [0, 1, 2], [0, 1], 10, 1.0)
    with pytest.raises(ValueError, match="epsilon"):
        release_rr_with_prior(ledger, [0], [0], [[0.5, 0.5]], -1.0)
    with pytest.raises(ValueError, match="repeated"):
        release_randomized_response(ledger, [0, 1], [3, 3], 10, 1.0)
    assert ledger.entries == ()
    release_randomized_response(ledger, [0, 1], [0, 1], 10, 1.0, tag="stage1")
    with pytest.raises(ValueError, match="already has an entry"):
        release_randomized_response(ledger, [0, 1], [2, 3], 10, 1.0, tag="stage1")
    assert len(ledger.entries) == 1


def test_release_records_exactly_the_members() -> None:
    ledger = PrivacyLedger(20)
    members = np.array([3, 5, 7])
    release_randomized_response(ledger, [1, 2, 3], members, 4, 2.0)
    assert np.array_equal(np.flatnonzero(ledger.entries[0].members), members)
    assert ledger.entries[0].event == randomized_response_event(2.0, 4)


def test_release_records_epsilon_on_the_ledger():
    ledger = PrivacyLedger(10)
    noisy = release_laplace_one_hot(ledger, np.arange(10) % 3, np.arange(10), 3, 0.8, rng=0, tag="alibi").arrays[
        "noisy_one_hot"
    ]
    assert noisy.shape == (10, 3)
    assert ledger.epsilon() == pytest.approx(0.8, abs=1e-3)
    assert ledger.epsilon() >= 0.8 - 1e-9
    event = laplace_one_hot_event(0.8)
    assert event.count == 2 and event.event.sensitivity == LAPLACE_GRID
    with pytest.raises(ValueError, match="epsilon"):
        release_laplace_one_hot(ledger, np.zeros(10, int), np.arange(10), 3, 0.0)


LABELS = np.array([0, 1, 1, 0, 1, 1])
BINS = np.array([[0, 1], [1, 0], [1, 1], [0, 0], [0, 1], [1, 2]])  # two features, with 2 and 3 bins
SIZES = [2, 3]


def test_release_records_the_marginals_once_for_every_member() -> None:
    ledger = PrivacyLedger(6)
    release = release_label_marginals(ledger, LABELS, np.arange(6), BINS, SIZES, 2, 0.5, rng=0, tag="marginals")
    assert release.arrays["counts"].shape == (5, 2)
    assert len(ledger.entries) == 1 and ledger.epsilon() == pytest.approx(0.5, abs=1e-3)
    with pytest.raises(ConfigError, match="bin index"):
        release_label_marginals(ledger, LABELS, np.arange(6), BINS + 2, SIZES, 2, 0.5, tag="again")
    assert len(ledger.entries) == 1


def test_release_records_every_query_on_every_member():
    predictions = np.array([[0, 1, 2], [0, 1, 1], [0, 2, 2]])
    teacher_of = np.array([0, 1, 2, 0, 1, 2])
    ledger = PrivacyLedger(6)
    release = release_pate_labels(ledger, predictions, teacher_of, np.arange(6), 3, 0.5, rng=0, tag="pate")
    answered, labels = release.arrays["answered"], release.labels
    assert answered.all() and labels.tolist() == [0, 1, 2]
    entry = ledger.entries[0]
    assert entry.num_members == 6 and entry.event == pate_event(3, 0.5)
    with pytest.raises(ValueError, match="both threshold"):
        release_pate_labels(PrivacyLedger(6), predictions, teacher_of, np.arange(6), 3, 0.5, threshold=2)
    with pytest.raises(ValueError, match="teacher_of"):
        release_pate_labels(PrivacyLedger(6), predictions, teacher_of + 1, np.arange(6), 3, 0.5)
    with pytest.raises(ValueError, match="threshold must lie"):
        release_pate_labels(
            PrivacyLedger(6), predictions, teacher_of, np.arange(6), 3, 0.5, threshold=4, threshold_noise_std=1.0
        )


def test_release_and_sequential_composition() -> None:
    ledger = PrivacyLedger(6)
    release_noisy_histogram(ledger, [0, 1, 1, 2, 2, 2], np.arange(6), [0, 0, 1, 1, 1, 0], 2, 3, 0.2, rng=0, tag="prior")
    assert ledger.epsilon() == pytest.approx(0.2, abs=1e-3)
    with pytest.raises(ValueError, match="groups must lie in"):
        release_noisy_histogram(ledger, [0, 1], [0, 1], [0, 5], 2, 3, 0.2)
    assert len(ledger.entries) == 1
