"""The privacy ledger: dp_accounting events, parallel and sequential composition, JSON, releases."""

from __future__ import annotations

import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting.pld import pld_privacy_accountant

from labeldp.accounting import (
    NEIGHBORING_RELATION,
    PrivacyLedger,
    event_from_dict,
    event_to_dict,
    randomized_response_event,
)
from labeldp.boundary import release_randomized_response, release_rr_with_prior, release_true_labels
from labeldp.mechanisms import randomized_response_probabilities, rr_with_prior_probabilities


def hockey_stick(p: np.ndarray, q: np.ndarray, epsilon: float) -> float:
    return float(np.maximum(p - math.exp(epsilon) * q, 0).sum())


@pytest.mark.parametrize("epsilon", [0.25, 1.0, 3.0])
@pytest.mark.parametrize("num_classes", [2, 10, 100])
def test_rr_event_matches_the_mechanism(epsilon: float, num_classes: int) -> None:
    """dp_accounting's RR event describes exactly our RR: same delta(eps') curve as the true distribution."""
    accountant = pld_privacy_accountant.PLDAccountant(NEIGHBORING_RELATION)
    accountant.compose(randomized_response_event(epsilon, num_classes))
    assert accountant.get_epsilon(0.0) == pytest.approx(epsilon, abs=2e-4)
    probs = randomized_response_probabilities(num_classes, epsilon)
    for eps_prime in (0.0, epsilon / 2):
        assert accountant.get_delta(eps_prime) == pytest.approx(hockey_stick(probs[0], probs[1], eps_prime), abs=1e-3)


def test_rr_with_prior_event_dominates_every_example() -> None:
    """The recorded event's delta(eps') bounds the true worst-case divergence of every released example."""
    rng = np.random.default_rng(0)
    priors = rng.dirichlet(np.full(10, 0.4), size=200)
    labels = rng.integers(0, 10, 200)
    for epsilon in (0.5, 1.0, 2.0):
        ledger = PrivacyLedger(200)
        release_rr_with_prior(ledger, labels, np.arange(200), priors, epsilon, rng=0)
        accountant = pld_privacy_accountant.PLDAccountant(NEIGHBORING_RELATION)
        accountant.compose(ledger.entries[0].event)
        probs = rr_with_prior_probabilities(priors, epsilon)
        for eps_prime in (0.0, 0.3 * epsilon, 0.8 * epsilon):
            worst = max(
                hockey_stick(probs[i, y], probs[i, y2], eps_prime)
                for i in range(0, 200, 7)
                for y in range(10)
                for y2 in range(10)
            )
            assert accountant.get_delta(eps_prime) >= worst - 1e-4
        assert ledger.epsilon() == pytest.approx(epsilon, abs=2e-4)


def test_parallel_and_sequential_composition() -> None:
    ledger = PrivacyLedger(100)
    ledger.record(randomized_response_event(1.0, 10), np.arange(50), "first half")
    ledger.record(randomized_response_event(2.0, 10), np.arange(50, 100), "second half")
    assert ledger.epsilon() == pytest.approx(2.0, abs=2e-4)  # disjoint: the worst part
    ledger.record(randomized_response_event(0.5, 10), np.arange(40, 60), "overlap")
    assert ledger.epsilon() == pytest.approx(2.5, abs=5e-4)  # examples 50..59 saw 2.0 then 0.5
    ledger.record(randomized_response_event(0.7, 10), np.arange(0, 45), "more on the first half")
    assert ledger.epsilon() == pytest.approx(2.5, abs=5e-4)  # 0..39: 1.7, 40..44: 2.2, 50..59: 2.5


def test_non_private_release_is_infinite_epsilon() -> None:
    ledger = PrivacyLedger(10)
    labels = release_true_labels(ledger, np.arange(10) % 3, np.arange(10), 3).labels
    assert np.array_equal(labels, np.arange(10) % 3)
    assert ledger.epsilon() == math.inf


def test_json_round_trip_and_save(tmp_path) -> None:
    ledger = PrivacyLedger(1000)
    rng = np.random.default_rng(0)
    release_randomized_response(ledger, rng.integers(0, 10, 300), np.arange(300), 10, 1.0, rng=0, tag="stage1")
    release_rr_with_prior(
        ledger,
        rng.integers(0, 10, 700),
        np.arange(300, 1000),
        rng.dirichlet(np.ones(10), size=700),
        1.0,
        rng=0,
        tag="stage2",
    )
    ledger.save(tmp_path / "ledger.json")
    loaded = PrivacyLedger.load(tmp_path / "ledger.json")
    assert [e.tag for e in loaded.entries] == ["stage1", "stage2"]
    assert all(np.array_equal(a.members, b.members) for a, b in zip(ledger.entries, loaded.entries))
    assert loaded.entries[1].event == ledger.entries[1].event
    assert loaded.epsilon() == ledger.epsilon()
    nested = dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(0.01, dp_accounting.GaussianDpEvent(1.1)), 100
    )
    assert event_from_dict(event_to_dict(nested)) == nested


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


def test_groups_by_counting_match_the_distinct_columns(monkeypatch) -> None:
    """The linear-time grouping (up to 16 entries) finds the same sets of entries as the general one."""
    from labeldp.accounting import ledger as ledger_module

    rng = np.random.default_rng(5)
    for entries in (1, 3, 9, 16):
        ledger = PrivacyLedger(5000)
        for index in range(entries):
            ledger.record(randomized_response_event(1.0 + index, 4), rng.random(5000) < 0.4, "rr")
        monkeypatch.setattr(ledger_module, "_SLICE", 777)  # several slices
        counted = sorted(ledger._groups())
        monkeypatch.setattr(ledger_module, "_COUNTED_ENTRIES", 0)
        assert counted == sorted(ledger._groups())
        monkeypatch.undo()
    assert PrivacyLedger(10)._groups() == []


def test_a_composition_of_gaussians_is_accounted_as_the_one_gaussian_it_equals() -> None:
    """PATE's hundreds of Gaussian queries are accounted as one Gaussian; the epsilon is that of
    composing the discretised parts in dp_accounting (to its discretisation), at a fraction of the cost."""
    from dp_accounting import dp_event

    from labeldp.accounting.calibration import accountant_epsilon
    from labeldp.accounting.events import GAUSSIAN_SHIFT_RELATION, gaussian_equivalent, pate_event

    event = pate_event(40, 30.0, 60.0)
    equivalent = gaussian_equivalent(event)
    assert equivalent.noise_multiplier == pytest.approx((40 * (2 / 30.0**2 + 1 / 60.0**2)) ** -0.5)
    composed = pld_privacy_accountant.PLDAccountant(GAUSSIAN_SHIFT_RELATION, value_discretization_interval=1e-4)
    composed.compose(event)
    assert accountant_epsilon(event, 1e-5, GAUSSIAN_SHIFT_RELATION) == pytest.approx(
        composed.get_epsilon(1e-5), abs=2e-3
    )
    sampled = dp_event.PoissonSampledDpEvent(0.1, dp_event.GaussianDpEvent(1.0))
    assert gaussian_equivalent(sampled) is None and gaussian_equivalent(dp_event.GaussianDpEvent(0.0)) is None
    assert gaussian_equivalent(dp_event.ComposedDpEvent([dp_event.GaussianDpEvent(1.0), sampled])) is None


def test_printed_epsilons_are_rounded_up_and_lower_bounds_down() -> None:
    """A printed guarantee is never below the true epsilon, a printed attack never above what it showed."""
    from labeldp.accounting.rounding import format_epsilon, format_lower_bound

    assert format_epsilon(1.0004) == "1.01" and format_epsilon(0.99951) == "1" and format_epsilon(2.0) == "2"
    assert format_epsilon(12.34) == "12.4" and format_epsilon(0.012341) == "0.0124" and format_epsilon(None) == "inf"
    for value in np.random.default_rng(0).uniform(0, 20, 1000):
        assert float(format_epsilon(value)) >= value and float(format_lower_bound(value)) <= value
    assert format_lower_bound(1.9999) == "1.999"
