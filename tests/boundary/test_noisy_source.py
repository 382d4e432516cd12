"""Labels randomized before labeldp saw them (a measurement API's event-level reports): the ledger entry
that records their source's guarantee (labeldp.boundary.release.release_external_labels, never a draw
of labeldp's own), ReleasedLabels.from_noisy_source, and a fit on them that undoes the channel."""

from __future__ import annotations

import math

import numpy as np
import pytest

from labeldp.accounting import PrivacyLedger
from labeldp.boundary import PrivateLabels, ReleasedLabels, release_external_labels, release_randomized_response
from labeldp.errors import ConfigError
from labeldp.mechanisms import flip_channel


def private(*positions: int) -> PrivateLabels:
    """Labels (a source's reports, or true labels) wrapped as the loader that reads a label column wraps them."""
    return PrivateLabels.from_indices(list(positions), 2)


def test_the_source_guarantee_is_recorded_and_composes_with_labeldps_own_releases() -> None:
    ledger = PrivacyLedger(4)
    release = release_external_labels(ledger, private(0, 1, 1, 0), np.arange(4), flip_channel(0.25), tag="source")
    assert "recorded, not drawn" in release.description and np.array_equal(release.labels, [0, 1, 1, 0])
    assert np.allclose(release.likelihood[1], [0.25, 0.75])  # Pr[reported 1 | true 0], Pr[reported 1 | true 1]
    assert ledger.epsilon() == pytest.approx(math.log(3), abs=1e-3)  # randomized response: exact
    release_randomized_response(ledger, private(0, 1), [0, 1], 2, 1.0, 0, "more")
    assert ledger.epsilon() == pytest.approx(math.log(3) + 1.0, abs=2e-3)


def test_a_stated_epsilon_below_the_channels_own_is_refused_and_above_it_is_recorded() -> None:
    with pytest.raises(ConfigError, match="implies"):
        release_external_labels(PrivacyLedger(2), private(0, 1), [0, 1], flip_channel(0.1), stated_epsilon=1.0)
    ledger = PrivacyLedger(2)
    release_external_labels(ledger, private(0, 1), [0, 1], flip_channel(0.1), stated_epsilon=3.0)
    assert ledger.epsilon() == pytest.approx(3.0, abs=1e-3)
    with pytest.raises(ConfigError, match="no privacy"):
        release_external_labels(PrivacyLedger(2), private(0, 1), [0, 1], [[1.0, 0.0], [0.5, 0.5]])


def test_a_users_reports_compose_when_the_user_is_the_privacy_unit() -> None:
    released = ReleasedLabels.from_noisy_source(
        np.array(["no", "yes", "no", "no"]), classes=["no", "yes"], channel="flip:0.1", units=["u", "u", "u", "v"]
    )
    assert released.epsilon == pytest.approx(3 * math.log(9), abs=3e-3)
    assert released.ledger.row_epsilon() == pytest.approx(math.log(9), abs=1e-3)


def test_a_classifier_fitted_on_a_noisy_source_predicts_the_clean_label() -> None:
    """Reports flipped with probability 0.3: the fit undoes the channel, and its accuracy on clean test
    labels is far above what the raw reports agree with."""
    from labeldp import LabelDPClassifier

    rng = np.random.default_rng(0)
    x = rng.normal(size=(4000, 2))
    clean = (x[:, 0] + 0.2 * rng.normal(size=4000) > 0).astype(int)
    reports = np.where(rng.random(4000) < 0.3, 1 - clean, clean)
    released = ReleasedLabels.from_noisy_source(reports, classes=[0, 1], channel="flip:0.3")
    model = LabelDPClassifier(classes=[0, 1], random_state=0).fit(x, released)
    accuracy = np.mean(model.predict(x).astype(int) == clean)
    assert accuracy > 0.85 > np.mean(reports == clean) + 0.1


def test_a_sources_noisy_counts_are_recorded_once_per_unit_as_it_states() -> None:
    from labeldp.boundary import release_external_counts

    ledger = PrivacyLedger(6, units=[0, 0, 0, 1, 1, 2])
    release = release_external_counts(ledger, np.arange(6), 2.0, "reports", "reports", counts=np.ones(3))
    assert release.aggregate and release.labels is None and np.array_equal(release.arrays["counts"], np.ones(3))
    assert "as the source states (recorded, not drawn by labeldp)" in release.description
    assert ledger.epsilon() == pytest.approx(2.0, abs=1e-3)  # once per unit, however many of its rows
    release_randomized_response(ledger, private(0, 1), [3, 5], 2, 1.0, 0, "more")
    assert ledger.epsilon() == pytest.approx(3.0, abs=2e-3)  # composes with labeldp's own
    with pytest.raises(ConfigError):
        release_external_counts(ledger, np.arange(6), 0.0, "reports")
