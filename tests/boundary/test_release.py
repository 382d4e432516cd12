"""The release boundary (boundary/release.py): each release validates its input before it spends,
records exactly its members and event on the ledger (RR, ALIBI's noisy one-hot vector, VLP's binary
vectors, the noisy histogram and marginals, PATE's answers, the Laplace value and RR-on-bins of numeric labels), and a
non-private release is accounted as infinite epsilon."""

from __future__ import annotations

import math

import numpy as np
import pytest

from labeldp.accounting import (
    PrivacyLedger,
    laplace_one_hot_event,
    laplace_value_event,
    pate_event,
    randomized_response_event,
    rr_on_sets_event,
    vector_labels_event,
)
from labeldp.boundary import (
    PrivateLabels,
    Release,
    release_label_marginals,
    release_laplace_one_hot,
    release_laplace_value,
    release_noisy_histogram,
    release_pate_labels,
    release_randomized_response,
    release_rr_on_bins,
    release_rr_with_prior,
    release_true_labels,
    release_vector_labels,
)
from labeldp.errors import ConfigError
from labeldp.mechanisms import (
    LAPLACE_GRID,
    grid_step,
    optimal_bins,
    released_values,
    rr_on_bins_probabilities,
    vector_labels,
    vector_labels_likelihood,
)
from labeldp.randomness import SecureGenerator

#: the marginals' rows: their labels and their bins of two public features
LABELS = PrivateLabels.from_indices([0, 1, 1, 0, 1, 1], 2)
BINS = np.array([[0, 1], [1, 0], [1, 1], [0, 0], [0, 1], [1, 2]])  # two features, with 2 and 3 bins
SIZES = [2, 3]
#: a numeric label's grid, and a prior over it
GRID = np.arange(1.0, 6.0)
PRIOR = np.array([0.06, 0.11, 0.27, 0.34, 0.22])


def private(positions, num_classes: int) -> PrivateLabels:
    """True labels as the releases take them: class (or grid) positions wrapped where they are made."""
    return PrivateLabels.from_indices(np.asarray(positions), num_classes)


def test_non_private_release_is_infinite_epsilon() -> None:
    ledger = PrivacyLedger(10)
    labels = release_true_labels(ledger, private(np.arange(10) % 3, 3), np.arange(10), 3).labels
    assert np.array_equal(labels, np.arange(10) % 3)
    assert ledger.epsilon() == math.inf


def test_release_validates_before_spending() -> None:
    ledger = PrivacyLedger(10)
    with pytest.raises(ValueError, match="domain has 13 values; this release was asked for 10"):
        release_randomized_response(ledger, private([0, 12], 13), [0, 1], 10, 1.0)
    with pytest.raises(ValueError, match="members must be indices"):
        release_randomized_response(ledger, private([0, 1], 10), [0, 10], 10, 1.0)
    with pytest.raises(ValueError, match="length mismatch"):
        release_randomized_response(ledger, private([0, 1, 2], 10), [0, 1], 10, 1.0)
    with pytest.raises(ValueError, match="epsilon"):
        release_rr_with_prior(ledger, private([0], 2), [0], [[0.5, 0.5]], -1.0)
    with pytest.raises(ValueError, match="repeated"):
        release_randomized_response(ledger, private([0, 1], 10), [3, 3], 10, 1.0)
    assert ledger.entries == ()
    release_randomized_response(ledger, private([0, 1], 10), [0, 1], 10, 1.0, tag="stage1")
    with pytest.raises(ValueError, match="already has an entry"):
        release_randomized_response(ledger, private([0, 1], 10), [2, 3], 10, 1.0, tag="stage1")
    assert len(ledger.entries) == 1


def test_release_records_exactly_the_members() -> None:
    ledger = PrivacyLedger(20)
    members = np.array([3, 5, 7])
    release_randomized_response(ledger, private([1, 2, 3], 4), members, 4, 2.0)
    assert np.array_equal(np.flatnonzero(ledger.entries[0].members), members)
    assert ledger.entries[0].event == randomized_response_event(2.0, 4)


def test_release_records_epsilon_on_the_ledger():
    ledger = PrivacyLedger(10)
    labels = private(np.arange(10) % 3, 3)
    noisy = release_laplace_one_hot(ledger, labels, np.arange(10), 3, 0.8, rng=0, tag="alibi").arrays["noisy_one_hot"]
    assert noisy.shape == (10, 3)
    assert ledger.epsilon() == pytest.approx(0.8, abs=1e-3)
    assert ledger.epsilon() >= 0.8 - 1e-9
    event = laplace_one_hot_event(0.8)
    assert event.count == 2 and event.event.sensitivity == LAPLACE_GRID
    with pytest.raises(ValueError, match="epsilon"):
        release_laplace_one_hot(ledger, private(np.zeros(10, int), 3), np.arange(10), 3, 0.0)


class _NoDraw(SecureGenerator):
    """A generator that fails the test if a release asks it for noise."""

    def random(self, size=None):
        raise AssertionError("a refused release drew noise")


def test_vector_labels_release_is_recorded_at_exactly_its_epsilon() -> None:
    """VLP: every check before the draw (nothing recorded, no noise asked for); then the vectors of the
    mechanism, their evidence, no label, and exactly epsilon on the ledger (per row: a unit's share)."""
    ledger, labels = PrivacyLedger(10), private(np.arange(10) % 4, 4)
    for call, message in [
        (lambda: release_vector_labels(ledger, labels, np.arange(10), 4, 0.0, _NoDraw()), "epsilon"),
        (lambda: release_vector_labels(ledger, labels, np.arange(10), 3, 1.0, _NoDraw()), "domain has 4 values"),
        (lambda: release_vector_labels(ledger, labels, np.arange(9), 4, 1.0, _NoDraw()), "length mismatch"),
        (lambda: release_vector_labels(ledger, labels, [0] * 10, 4, 1.0, _NoDraw()), "repeated"),
        (lambda: release_vector_labels(ledger, np.arange(10) % 4, np.arange(10), 4, 1.0, _NoDraw()), "PrivateLabels"),
    ]:
        with pytest.raises(ConfigError, match=message):
            call()
    assert ledger.entries == ()
    release = release_vector_labels(ledger, labels, np.arange(10), 4, 1.5, rng=3, tag="vlp")
    assert release.labels is None and release.event == vector_labels_event(1.5)
    assert np.array_equal(release.arrays["vectors"], vector_labels(np.arange(10) % 4, 4, 1.5, 3))
    np.testing.assert_allclose(release.likelihood, vector_labels_likelihood(release.arrays["vectors"], 1.5))
    assert release.arrays["noisy_one_hot"].shape == (10, 4) and np.all(release.arrays["k"] == 4)
    assert ledger.epsilon() == 1.5 and ledger.entries[0].num_members == 10
    with pytest.raises(ConfigError, match="already has an entry"):
        release_vector_labels(ledger, labels, np.arange(10), 4, 1.5, _NoDraw(), tag="vlp")
    saved = Release.from_arrays(release.to_arrays())
    assert saved.labels is None and np.array_equal(saved.arrays["vectors"], release.arrays["vectors"])
    per_unit = PrivacyLedger(4, units=np.array([0, 0, 1, 1]))
    shared = release_vector_labels(per_unit, private([0, 1, 2, 3], 4), np.arange(4), 4, 2.0, rng=0)
    assert shared.event == vector_labels_event(1.0) and per_unit.epsilon() == 2.0


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
    labels = private([0, 1, 1, 2, 2, 2], 3)
    release_noisy_histogram(ledger, labels, np.arange(6), [0, 0, 1, 1, 1, 0], 2, 3, 0.2, rng=0, tag="prior")
    assert ledger.epsilon() == pytest.approx(0.2, abs=1e-3)
    with pytest.raises(ValueError, match="groups must lie in"):
        release_noisy_histogram(ledger, private([0, 1], 3), [0, 1], [0, 5], 2, 3, 0.2)
    assert len(ledger.entries) == 1


def test_laplace_value_release_is_exact_and_recorded() -> None:
    grid = np.linspace(0.0, 10.0, 41)  # step 0.25
    assert grid_step(grid) == 0.25
    ledger = PrivacyLedger(300)
    labels = np.arange(300) % grid.size
    release = release_laplace_value(
        ledger, private(labels, grid.size), np.arange(300), grid, 2.0, SecureGenerator(), "stage1"
    )
    steps = release.arrays["noisy_steps"]
    assert steps.dtype.kind == "i" and not np.array_equal(steps, labels)
    assert np.array_equal(release.arrays["values"], steps * 0.25)  # on the lattice, exactly
    assert np.array_equal(released_values(steps, grid), release.arrays["values"])
    assert release.event == laplace_value_event(2.0, 40) and release.event.sensitivity == 40
    assert ledger.epsilon() == pytest.approx(2.0, abs=1e-3)
    assert release.likelihood.shape == (300, 41) and np.array_equal(release.labels, np.clip(steps, 0, 40))


def test_rr_on_bins_release_records_rr_over_the_smallest_d() -> None:
    rng = np.random.default_rng(0)
    n, epsilon = 400, 2.0
    labels = private(rng.integers(0, 5, n), 5)
    priors = np.vstack([PRIOR, np.eye(5)[3], rng.dirichlet(np.ones(5), n - 2)])  # row 1: a point mass, d = 1
    ledger = PrivacyLedger(n)
    release = release_rr_on_bins(ledger, labels, np.arange(n), GRID, priors, epsilon, rng, "stage1")
    maps = optimal_bins(priors, GRID, epsilon)
    d = release.arrays["k"]
    assert np.array_equal(d, maps.d) and d[1] == 1 and d.max() >= 2
    assert release.event == rr_on_sets_event(epsilon, d)
    assert release.event.num_buckets == d[d >= 2].min()
    assert ledger.epsilon() == pytest.approx(epsilon, abs=1e-3)
    assert np.array_equal(release.arrays["bin_of"], maps.bin_of)
    assert np.array_equal(release.arrays["values"], maps.values[np.arange(n), release.labels])
    probabilities = rr_on_bins_probabilities(maps, GRID, epsilon)  # (n, G, G)
    assert np.allclose(release.likelihood, probabilities[np.arange(n), :, release.labels])
    assert release.arrays["values"][1] == 4.0  # the point mass releases its value


def test_rr_on_bins_release_with_shared_rows_and_constant_maps() -> None:
    ledger = PrivacyLedger(6)
    rows = np.vstack([PRIOR, np.eye(5)[0]])
    groups = np.array([0, 0, 1, 1, 0, 1])
    release = release_rr_on_bins(ledger, private([0, 1, 2, 3, 4, 0], 5), np.arange(6), GRID, rows, 1.0, 0, "s", groups)
    assert np.array_equal(release.arrays["k"][groups == 1], [1, 1, 1])
    assert np.all(release.arrays["values"][groups == 1] == 1.0)
    assert np.array_equal(release.arrays["bin_of"][2], [0, 0, 0, 0, 0])
    assert release.event.num_buckets == release.arrays["k"][0]
    only_constant = PrivacyLedger(2)
    release = release_rr_on_bins(only_constant, private([0, 4], 5), np.arange(2), GRID, np.eye(5)[2], 1.0, 0, "c")
    assert type(release.event).__name__ == "NoOpDpEvent" and only_constant.epsilon() == 0.0
    assert math.isclose(rr_on_sets_event(1.0, [1, 3, 2]).noise_parameter, 2 / (math.e + 1))


def test_rr_on_bins_release_refuses_bad_input_before_recording() -> None:
    ledger = PrivacyLedger(3)
    with pytest.raises(ConfigError, match="length mismatch"):
        release_rr_on_bins(ledger, private([0, 1, 2], 5), np.arange(3), GRID, np.tile(PRIOR, (2, 1)), 1.0)
    with pytest.raises(ConfigError, match="domain has 8 values"):
        release_rr_on_bins(ledger, private([0, 1, 7], 8), np.arange(3), GRID, PRIOR, 1.0)
    with pytest.raises(ConfigError, match="strictly increasing"):
        release_rr_on_bins(ledger, private([0, 1, 2], 5), np.arange(3), GRID[::-1], PRIOR, 1.0)
    assert not ledger.entries


@pytest.mark.parametrize("release", [release_randomized_response, release_vector_labels])
def test_whether_a_release_goes_ahead_never_depends_on_the_labels(release) -> None:
    """A domain that does not fit is refused alike for neighbouring labels, before any is read."""
    for num_classes, declared in ((1, 2), (2, 3)):
        said = set()
        for labels in ([0, 0, 0], [0, 1, 0], [0, declared - 1, 0]):
            ledger = PrivacyLedger(3)
            with pytest.raises(ConfigError) as refused:
                release(ledger, private(labels, declared), np.arange(3), num_classes, 1.0)
            said.add(str(refused.value))
            assert ledger.entries == ()
        assert len(said) == 1, said
