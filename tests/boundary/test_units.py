"""Privacy units (labeldp.boundary.units and the ledger's units): the labels of a unit's rows, changed
together, move every release by at most e^epsilon; the contribution bound never reads a label; the
ledger composes per unit."""

from __future__ import annotations

import inspect
import itertools
import math

import numpy as np
import pytest
from dp_accounting import dp_event

from labeldp.accounting import PrivacyLedger, randomized_response_event
from labeldp.accounting.ledger import pure_epsilon
from labeldp.boundary import (
    PrivateLabels,
    release_label_marginals,
    release_noisy_histogram,
    release_pate_labels,
    release_randomized_response,
    release_rr_with_prior,
)
from labeldp.boundary.units import bound_contributions, split_by_unit, unit_codes
from labeldp.errors import ConfigError, DataError
from labeldp.mechanisms import randomized_response_probabilities
from labeldp.mechanisms.discrete_laplace import discrete_laplace_pmf

#: the reported epsilon's discretisation allowance, per composed event
SLACK = 1e-3


def test_a_unit_is_charged_once_per_row_it_has_in_a_release_and_once_for_an_aggregate() -> None:
    units = np.array([0, 0, 0, 1, 2, 2])
    ledger = PrivacyLedger(6, units=units)
    ledger.record(randomized_response_event(1.0, 2), np.arange(6), "rr")
    assert ledger.epsilon() == pytest.approx(3.0, abs=3 * SLACK)  # unit 0's three rows
    assert ledger.row_epsilon() == pytest.approx(1.0, abs=SLACK)
    aggregate = PrivacyLedger(6, units=units)
    aggregate.record(randomized_response_event(1.0, 2), np.arange(6), "counts", aggregate=True)
    assert aggregate.epsilon() == pytest.approx(1.0, abs=SLACK)
    assert PrivacyLedger.from_dict(ledger.to_dict()).epsilon() == ledger.epsilon()
    assert ledger.to_dict()["privacy_units"]["count"] == 3


def test_without_units_nothing_changes() -> None:
    ledger = PrivacyLedger(4)
    ledger.record(randomized_response_event(1.0, 2), [0, 1], "a")
    ledger.record(randomized_response_event(2.0, 2), [1, 2], "b")
    assert ledger.epsilon() == pytest.approx(3.0, abs=2 * SLACK) and ledger.row_epsilon() == ledger.epsilon()
    assert ledger.contribution([0, 1]) == 1 and "privacy_units" not in ledger.to_dict()


@pytest.mark.parametrize("epsilon", [0.5, 2.0])
def test_a_units_labels_changed_together_move_randomized_response_by_at_most_e_to_the_epsilon(epsilon) -> None:
    """Exact: the unit's 3 rows are released by RR at epsilon / 3 each, and every output's probability
    under any two labellings of the unit differs by at most e^epsilon (attained)."""
    units = np.array([0, 0, 0, 1])
    ledger = PrivacyLedger(4, units=units)
    labels = PrivateLabels.from_indices([0, 1, 2, 0], 3)
    release = release_randomized_response(ledger, labels, np.arange(4), 3, epsilon, 0, "rr")
    row_epsilon = epsilon / 3
    assert f"epsilon={row_epsilon:g} per row" in release.description
    assert ledger.epsilon() == pytest.approx(epsilon, abs=3 * SLACK)
    channel = randomized_response_probabilities(3, row_epsilon)  # Pr[released z | true y]
    worst = 0.0
    for truth, other in itertools.product(itertools.product(range(3), repeat=3), repeat=2):
        for output in itertools.product(range(3), repeat=3):
            ratio = np.prod([channel[y, z] for y, z in zip(truth, output)]) / np.prod(
                [channel[y, z] for y, z in zip(other, output)]
            )
            worst = max(worst, ratio)
    assert worst == pytest.approx(math.exp(epsilon)) and worst <= math.exp(epsilon) * (1 + 1e-12)


def test_rr_with_prior_gives_each_row_epsilon_over_the_units_rows() -> None:
    units = np.array([0, 0, 1, 1, 1])
    ledger = PrivacyLedger(5, units=units)
    priors = np.full((5, 4), 0.25)
    release_rr_with_prior(ledger, PrivateLabels.from_indices([0, 1, 2, 3, 0], 4), np.arange(5), priors, 1.5, 0, "stage")
    assert ledger.epsilon() == pytest.approx(1.5, abs=3 * SLACK)
    assert ledger.row_epsilon() == pytest.approx(0.5, abs=SLACK)


def test_a_histogram_covers_a_units_rows_together(monkeypatch) -> None:
    """The histogram's noise is discrete Laplace with parameter epsilon / 2c for a unit of c rows: the
    unit's labels move at most 2c cells by one, so any output's probability changes by at most e^epsilon."""
    from labeldp.mechanisms import histogram

    units = np.array([0, 0, 0, 1, 2])
    ledger = PrivacyLedger(5, units=units)
    seen = {}
    real = histogram.discrete_laplace

    def spy(parameter, shape, rng):
        seen["parameter"] = parameter
        return real(parameter, shape, rng)

    monkeypatch.setattr(histogram, "discrete_laplace", spy)
    labels, groups = np.array([0, 1, 1, 0, 1]), np.array([0, 0, 1, 1, 1])
    release_noisy_histogram(
        ledger, PrivateLabels.from_indices(labels, 2), np.arange(5), groups, 2, 2, 1.2, 0, "histogram"
    )
    assert seen["parameter"] == pytest.approx(1.2 / 6)
    assert ledger.epsilon() == pytest.approx(1.2, abs=SLACK) and ledger.row_epsilon() == pytest.approx(0.4, abs=SLACK)
    # exact: unit 0's three labels all flipped move its group's cells (0 and 1) by one per row changed
    before, after = np.zeros((2, 2), int), np.zeros((2, 2), int)
    np.add.at(before, (groups, labels), 1)
    flipped = labels.copy()
    flipped[:3] = 1 - flipped[:3]
    np.add.at(after, (groups, flipped), 1)
    outputs = np.arange(-8, 12)
    worst = max(
        np.prod(discrete_laplace_pmf(np.array(z) - before.ravel(), seen["parameter"]))
        / np.prod(discrete_laplace_pmf(np.array(z) - after.ravel(), seen["parameter"]))
        for z in itertools.product(outputs, repeat=4)
        if abs(z[0]) + abs(z[1]) < 12  # a window around both tables keeps the product enumerable
    )
    assert worst <= math.exp(1.2) * (1 + 1e-9)


def test_marginals_cover_a_units_rows_together() -> None:
    units = np.array([0, 0, 1, 1])
    ledger = PrivacyLedger(4, units=units)
    bins = np.array([[0, 1], [1, 0], [0, 0], [1, 1]])
    labels = PrivateLabels.from_indices([0, 1, 1, 0], 2)
    release = release_label_marginals(ledger, labels, np.arange(4), bins, [2, 2], 2, 1.0, 0, "m")
    assert release.aggregate and "up to 2 rows" in release.description
    assert ledger.epsilon() == pytest.approx(1.0, abs=SLACK) and ledger.row_epsilon() == pytest.approx(0.5, abs=SLACK)


def test_pate_refuses_units_of_several_rows() -> None:
    ledger = PrivacyLedger(4, units=np.array([0, 0, 1, 2]))
    with pytest.raises(ConfigError, match="one row per unit"):
        release_pate_labels(ledger, np.zeros((3, 4), int), np.array([0, 1, 2, 0]), np.arange(4), 2, 10.0)


def test_the_contribution_bound_reads_no_label_and_keeps_at_most_m_rows_per_unit() -> None:
    """The rule's inputs are the units, the bound and the public seed (no label can reach it); it keeps
    every row of a small unit, exactly m of a large one, each with equal chance, the same for a seed."""
    assert list(inspect.signature(bound_contributions).parameters) == ["units", "max_rows", "seed"]
    units = unit_codes(np.repeat(np.array(["big", "small", "mid"]), [50, 2, 5]))
    kept = bound_contributions(units, 3, seed=4)
    assert np.array_equal(np.bincount(units[kept]), [3, 2, 3])
    assert np.array_equal(kept, bound_contributions(units, 3, seed=4))
    chosen = np.zeros(50)
    for seed in range(2000):
        chosen[bound_contributions(units, 3, seed)[:3]] += 1  # the big unit's rows come first
    expected = 2000 * 3 / 50  # 120 each; binomial sd ~10.7
    assert np.all(np.abs(chosen - expected) < 6 * math.sqrt(expected * (1 - 3 / 50)))


def test_a_split_by_unit_keeps_each_units_rows_together() -> None:
    units = unit_codes(np.arange(200) // 4)
    held = split_by_unit(units, 0.2, seed=1)
    assert held.sum() == 10 * 4 and all(len(set(held[units == u])) == 1 for u in range(50))


def test_a_row_without_a_unit_is_refused() -> None:
    with pytest.raises(DataError, match="missing"):
        unit_codes(np.array(["a", None, "b"], dtype=object))


def test_privatize_per_unit_keeps_the_same_rows_whatever_the_labels() -> None:
    """At most m rows of each user are released, each at epsilon / c; which rows does not depend on the
    labels; the ledger's epsilon is the user's, each row's is epsilon / c."""
    from labeldp import privatize

    users = np.repeat(np.arange(40), np.r_[np.full(20, 12), np.full(20, 2)])
    rng = np.random.default_rng(0)
    first = privatize(rng.integers(0, 2, users.size), classes=[0, 1], epsilon=2.0, units=users, max_rows_per_unit=4)
    second = privatize(rng.integers(0, 2, users.size), classes=[0, 1], epsilon=2.0, units=users, max_rows_per_unit=4)
    assert np.array_equal(first.ids, second.ids) and first.ids.size == 20 * 4 + 20 * 2
    assert np.bincount(users[first.ids]).max() == 4
    assert first.epsilon == pytest.approx(0.5) and first.ledger.epsilon() == pytest.approx(2.0, abs=4 * SLACK)
    with pytest.raises(ConfigError, match="max_rows_per_unit"):
        privatize(np.zeros(4, int), classes=[0, 1], epsilon=1.0, units=[0, 0, 1, 1])


def _users_dataset(private_test: bool):
    """300 training rows of 100 users (3 rows each), 60 test rows of 20 other users; classes from x."""
    from labeldp.boundary import PrivateLabels
    from labeldp.data import LabeledDataset

    rng = np.random.default_rng(0)
    x = rng.normal(size=(360, 4)).astype(np.float32)
    y = (x[:, 0] > 0).astype(int)
    units = np.repeat(np.arange(120), 3)
    y_test = PrivateLabels.from_indices(y[300:], 2) if private_test else y[300:]
    return LabeledDataset(
        "users", x[:300], y[:300], x[300:], y_test, num_classes=2, units=units if private_test else units[:300]
    )


@pytest.mark.parametrize(("method", "private_test"), [("lp-1st", True), ("lp-2st", False)])
def test_a_run_spends_its_epsilon_per_unit(tmp_path, method, private_test) -> None:
    """A run's epsilon is each user's (three rows each): every release gives a row epsilon / 3, stages
    split whole users, the private test rows are released per user too; the summary shows both."""
    from labeldp.accounting import PrivacyLedger
    from labeldp.runs import RunConfig, train_run
    from labeldp.training import TrainConfig

    config = RunConfig(dataset="csv", method=method, epsilon=1.5, train=TrainConfig(epochs=1, batch_size=64))
    summary = train_run(config, tmp_path / "run", dataset=_users_dataset(private_test), progress=False)
    assert summary["epsilon"] == pytest.approx(1.5, abs=3 * SLACK)
    assert summary["privacy_units"] == {
        "units": 120 if private_test else 100,
        "most_rows": 3,
        "row_epsilon": pytest.approx(0.5, abs=SLACK),
    }
    ledger = PrivacyLedger.load(tmp_path / "run" / "ledger.json")
    assert ledger.units is not None and ledger.epsilon() == pytest.approx(1.5, abs=3 * SLACK)
    assert all("per row" in entry.description for entry in ledger.entries)


def test_a_large_unit_of_pure_releases_is_charged_their_sum_not_infinity() -> None:
    """20 rows of a unit released by RR at epsilon / 20 each: dp_accounting's PLD of the 20-fold
    composition loses the mass that decides delta = 0 to truncation; basic composition (pure DP) bounds
    it by epsilon, which the ledger reports."""
    units = np.repeat(np.arange(10), 20)
    ledger = PrivacyLedger(200, units=units)
    release_randomized_response(ledger, PrivateLabels.from_indices(np.zeros(200, int), 2), np.arange(200), 2, 0.5, 0)
    assert ledger.epsilon() == pytest.approx(0.5, abs=1e-9) and ledger.epsilon(1e-6) < 0.5
    assert pure_epsilon(randomized_response_event(0.7, 3)) == pytest.approx(0.7)
    assert pure_epsilon(dp_event.GaussianDpEvent(1.0)) is None
