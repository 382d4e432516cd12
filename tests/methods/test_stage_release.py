"""The releases of LP-MST's stages (methods/stage_release.py), which labeldp train's drivers and
LabelDPClassifier share: each stage's mechanism, noise stream and tag; the cell counts; their soft labels."""

from __future__ import annotations

import numpy as np
import pytest

from labeldp.accounting import PrivacyLedger
from labeldp.boundary import (
    PrivateLabels,
    release_noisy_histogram,
    release_randomized_response,
    release_rr_with_prior,
    release_vector_labels,
)
from labeldp.methods.stage_release import cell_soft_labels, release_cell_counts, release_stage_labels
from labeldp.priors import cell_fractions
from labeldp.randomness import NoiseSource

NOISE = NoiseSource(insecure_seed=5)
LABELS = np.random.default_rng(0).integers(0, 3, 40)
MEMBERS = np.arange(10, 30)


def _labels() -> PrivateLabels:
    return PrivateLabels(LABELS, classes=[0, 1, 2])[MEMBERS]


@pytest.mark.parametrize("vectors", [False, True])
def test_a_stage_without_a_prior_is_randomized_response_or_vectors(vectors: bool) -> None:
    ledger, again = PrivacyLedger(40), PrivacyLedger(40)
    release = release_stage_labels(ledger, _labels(), MEMBERS, 3, 1.0, NOISE, 3, vectors=vectors)
    mechanism = release_vector_labels if vectors else release_randomized_response
    expected = mechanism(again, _labels(), MEMBERS, 3, 1.0, NOISE.generator("label-release", 3), "stage3")
    assert np.array_equal(release.likelihood, expected.likelihood)
    assert [e.tag for e in ledger.entries] == ["stage3"] and ledger.epsilon() == again.epsilon()


def test_a_later_stage_releases_under_its_prior() -> None:
    prior = np.random.default_rng(1).dirichlet(np.ones(3), MEMBERS.size)
    ledger, again = PrivacyLedger(40), PrivacyLedger(40)
    release = release_stage_labels(ledger, _labels(), MEMBERS, 3, 2.0, NOISE, 2, prior)
    expected = release_rr_with_prior(
        again, _labels(), MEMBERS, prior, 2.0, NOISE.generator("label-release", 2), "stage2"
    )
    assert np.array_equal(release.labels, expected.labels) and np.array_equal(release.arrays["k"], expected.arrays["k"])
    assert [e.tag for e in ledger.entries] == ["stage2"]


def test_cell_counts_are_stage_two_with_their_cells_and_give_soft_labels() -> None:
    cells = np.arange(MEMBERS.size) % 4
    ledger, again = PrivacyLedger(40), PrivacyLedger(40)
    counted = release_cell_counts(ledger, _labels(), MEMBERS, cells, 3, 1.0, NOISE)
    expected = release_noisy_histogram(again, _labels(), MEMBERS, cells, 4, 3, 1.0, NOISE.generator("label-release", 2))
    assert np.array_equal(counted.arrays["counts"], expected.arrays["counts"])
    assert np.array_equal(counted.arrays["cells"], cells) and [e.tag for e in ledger.entries] == ["stage2"]
    prior, likelihood = np.full((5, 3), 1 / 3), np.eye(3)[[0, 1, 2, 0, 1]] + 0.5
    posterior, fractions = cell_soft_labels(prior, likelihood, counted)
    assert np.allclose(posterior.sum(axis=1), 1.0) and np.array_equal(posterior.argmax(axis=1), [0, 1, 2, 0, 1])
    assert np.array_equal(fractions, cell_fractions(counted.arrays["counts"], cells))
