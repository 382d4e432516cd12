"""The privacy ledger (accounting/ledger.py): parallel and sequential composition of its entries per
example, the grouping of examples by the entries that touched them, its JSON round trip, and its
epsilon against dp_accounting (DP-SGD's add-or-remove relation) and against the closed form of the
Gaussian (PATE's queries)."""

from __future__ import annotations

import json
import math

import dp_accounting
import numpy as np
import pytest

from labeldp.accounting import (
    DPSGD_RELATION,
    PrivacyLedger,
    dpsgd_epsilon,
    dpsgd_event,
    event_from_dict,
    event_to_dict,
    pate_epsilon,
    pate_event,
    randomized_response_event,
)
from labeldp.boundary import PrivateLabels, release_randomized_response, release_rr_with_prior
from tests.helpers import analytic_gaussian_epsilon


def test_parallel_and_sequential_composition() -> None:
    ledger = PrivacyLedger(100)
    ledger.record(randomized_response_event(1.0, 10), np.arange(50), "first half")
    ledger.record(randomized_response_event(2.0, 10), np.arange(50, 100), "second half")
    assert ledger.epsilon() == pytest.approx(2.0, abs=2e-4)  # disjoint: the worst part
    ledger.record(randomized_response_event(0.5, 10), np.arange(40, 60), "overlap")
    assert ledger.epsilon() == pytest.approx(2.5, abs=5e-4)  # examples 50..59 saw 2.0 then 0.5
    ledger.record(randomized_response_event(0.7, 10), np.arange(0, 45), "more on the first half")
    assert ledger.epsilon() == pytest.approx(2.5, abs=5e-4)  # 0..39: 1.7, 40..44: 2.2, 50..59: 2.5


def test_json_round_trip_and_save(tmp_path) -> None:
    ledger = PrivacyLedger(1000)
    rng = np.random.default_rng(0)
    first = PrivateLabels.from_indices(rng.integers(0, 10, 300), 10)
    release_randomized_response(ledger, first, np.arange(300), 10, 1.0, rng=0, tag="stage1")
    release_rr_with_prior(
        ledger,
        PrivateLabels.from_indices(rng.integers(0, 10, 700), 10),
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


def test_ledger_epsilon_equals_dp_accounting_and_survives_json(tmp_path):
    ledger = PrivacyLedger(1000, DPSGD_RELATION)
    ledger.record(dpsgd_event(1.1, 0.05, 300), np.arange(1000), "dp-sgd", "dp-sgd")
    expected = dpsgd_epsilon(1.1, 0.05, 300, 1e-5)
    assert ledger.epsilon(1e-5) == pytest.approx(expected, rel=1e-9)
    ledger.save(tmp_path / "ledger.json", 1e-5)
    loaded = PrivacyLedger.load(tmp_path / "ledger.json")
    assert loaded.neighboring_relation == DPSGD_RELATION
    assert loaded.epsilon(1e-5) == pytest.approx(expected, rel=1e-9)
    assert json.loads((tmp_path / "ledger.json").read_text())["neighboring_relation"] == "ADD_OR_REMOVE_ONE"
    with pytest.raises(ValueError, match="replace-one"):
        ledger.record(randomized_response_event(1.0, 10), np.arange(3), "label RR on a full-DP ledger")


@pytest.mark.parametrize("queries,sigma,sigma1", [(1, 20.0, None), (150, 60.0, None), (400, 80.0, 160.0)])
def test_ledger_epsilon_equals_the_closed_form(queries, sigma, sigma1):
    """Q answers (L2 sensitivity sqrt 2) and Q threshold checks (sensitivity 1) compose into one
    Gaussian with mu^2 = Q (2 / sigma^2 + 1 / sigma1^2); its epsilon has a closed form."""
    ledger = PrivacyLedger(100)
    ledger.record(pate_event(queries, sigma, sigma1), np.arange(100), "pate")
    mu = math.sqrt(queries * (2 / sigma**2 + (0 if sigma1 is None else 1 / sigma1**2)))
    for delta in (1e-5, 1e-3):
        exact = analytic_gaussian_epsilon(mu, delta)
        assert exact <= ledger.epsilon(delta) <= exact + 1e-3
        assert pate_epsilon(queries, sigma, delta, sigma1) == pytest.approx(ledger.epsilon(delta), abs=1e-6)


def test_a_release_without_noise_is_asked_for_before_any_composition() -> None:
    """A noiseless part anywhere makes the ledger's epsilon inf without a PLD; every other part is still checked
    (one the ledger cannot account is refused), and a noiseless event has no PLD to ask for."""
    from dp_accounting import dp_event

    from labeldp.accounting.composition import event_pld, non_private
    from labeldp.errors import ConfigError

    rr = dp_event.RandomizedResponseDpEvent(0.5, 3)
    noiseless = dp_event.ComposedDpEvent([rr, dp_event.SelfComposedDpEvent(dp_event.GaussianDpEvent(0.0), 4)])
    assert non_private(noiseless) and not non_private(rr)
    ledger = PrivacyLedger(dataset_size=10)
    ledger.record(noiseless, np.arange(10), "noiseless")
    assert ledger.epsilon() == math.inf
    sampled = dp_event.PoissonSampledDpEvent(0.1, dp_event.GaussianDpEvent(1.0))  # add-or-remove only
    with pytest.raises(ConfigError, match="add-or-remove only"):
        ledger.record(dp_event.ComposedDpEvent([dp_event.NonPrivateDpEvent(), sampled]), np.arange(10), "unaccountable")
    with pytest.raises(ConfigError, match="without privacy"):
        event_pld(noiseless)


@pytest.mark.parametrize(
    "event, words",
    [
        ("noiseless rr", "replace-one-label relation only"),
        ("negative count", "whole number"),
        ("fractional count", "whole number"),
    ],
)
def test_an_event_the_ledger_cannot_account_is_refused_when_recorded(event, words) -> None:
    """From a review: a noiseless label mechanism under add-or-remove, and a composition counted -1 or 2.5 times,
    were recorded once the PLD was no longer built at record time."""
    from dp_accounting import dp_event

    from labeldp.errors import ConfigError

    rr = dp_event.RandomizedResponseDpEvent(0.5, 2)
    made = {
        "noiseless rr": dp_event.RandomizedResponseDpEvent(0.0, 2),
        "negative count": dp_event.SelfComposedDpEvent(rr, -1),
        "fractional count": dp_event.SelfComposedDpEvent(rr, 2.5),
    }[event]
    relation = DPSGD_RELATION if event == "noiseless rr" else dp_accounting.NeighboringRelation.REPLACE_ONE
    ledger = PrivacyLedger(dataset_size=3, neighboring_relation=relation)
    with pytest.raises(ConfigError, match=words):
        ledger.record(made, np.arange(3), "bad")
