"""RR-on-bins for numeric labels (mechanisms/bins.py): the optimal maps against a brute force over
every monotone partition, the exact release probabilities, the e^eps bound, the sampler's empirical
distribution, the exactness of the drop decision at huge epsilon, and argument checks."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from labeldp.mechanisms import bins as bins_module
from labeldp.mechanisms.bins import (
    BinMaps,
    optimal_bins,
    rr_on_bins,
    rr_on_bins_likelihood,
    rr_on_bins_probabilities,
)
from labeldp.randomness import SecureGenerator
from tests.helpers import frequencies_match

EPSILONS = [0.1, 0.5, 1.0, 2.0, 4.0, 8.0]
GRID6 = np.array([0.0, 0.5, 1.0, 2.0, 3.5, 5.0])  # uneven spacing on purpose


def all_partitions(num_points: int) -> tuple[np.ndarray, np.ndarray]:
    """Every monotone map of num_points grid points onto contiguous non-empty bins: (N, G) bin_of, (N,) d."""
    maps = []
    for cuts in itertools.product([0, 1], repeat=num_points - 1):  # 1: a new bin starts at this point
        maps.append(np.concatenate([[0], np.cumsum(cuts)]))
    bin_of = np.array(maps)
    return bin_of, bin_of[:, -1] + 1


def brute_force_losses(prior: np.ndarray, grid: np.ndarray, epsilon: float):
    """Expected squared error of RR-on-bins for every partition, straight from the definition:
    bin j's value is its weighted mean under w_j(y) = e^eps if y in bin j else 1, and a label in bin
    k is released as value j with probability w_j(y) / (e^eps + d - 1)."""
    bin_of, d = all_partitions(grid.size)
    e = math.exp(epsilon)
    bins = np.arange(grid.size)
    weight = np.where(bin_of[:, None, :] == bins[None, :, None], e, 1.0)  # (N, bin j, grid point y)
    exists = bins[None, :] < d[:, None]
    mass = (weight * prior).sum(axis=2)
    values = np.where(exists, (weight * prior * grid).sum(axis=2) / mass, np.nan)
    squared = np.where(exists[:, :, None], (values[:, :, None] - grid) ** 2, 0.0)
    loss = (weight * prior * squared).sum(axis=(1, 2)) / (e + d - 1)
    return bin_of, d, values, loss


def rule_choice(prior, grid, epsilon, tolerance):
    """The documented tie rule applied to the brute force: smallest d within tolerance of the best
    loss; for that d, among partitions within tolerance of its best, the latest bins start earliest."""
    bin_of, d, values, loss = brute_force_losses(prior, grid, epsilon)
    d_best = d[loss <= loss.min() + tolerance].min()
    candidates = np.flatnonzero((d == d_best) & (loss <= loss[d == d_best].min() + tolerance))
    starts = [tuple(np.flatnonzero(np.diff(bin_of[i]))[::-1]) for i in candidates]
    chosen = candidates[min(range(len(candidates)), key=lambda c: starts[c])]
    return bin_of, d, values, loss, chosen


def test_partition_enumeration_is_complete() -> None:
    bin_of, d = all_partitions(5)
    assert len(bin_of) == 16 and len({tuple(row) for row in bin_of}) == 16
    assert np.all(np.diff(bin_of, axis=1) >= 0) and np.all(np.diff(bin_of, axis=1) <= 1)
    assert sorted(np.bincount(d)[1:]) == sorted([math.comb(4, k) for k in range(5)])


def brute_force_cases():
    rng = np.random.default_rng(11)
    cases = []
    for num_points in range(2, 8):
        grid = np.sort(rng.choice(np.arange(-10, 20), size=num_points, replace=False)).astype(float) / 2
        random = rng.dirichlet(np.full(num_points, 0.7))
        with_zeros = rng.dirichlet(np.ones(num_points)) * (rng.random(num_points) < 0.6)
        with_zeros[num_points // 2] += 0.1
        symmetric = rng.dirichlet(np.ones(num_points))
        point = np.zeros(num_points)
        point[rng.integers(num_points)] = 1.0
        ends = np.zeros(num_points)
        ends[[0, -1]] = 0.5
        priors = [
            random,
            with_zeros / with_zeros.sum(),
            (symmetric + symmetric[::-1]) / 2,
            np.full(num_points, 1 / num_points),
            point,
            ends,
        ]
        cases.append((np.arange(num_points, dtype=float), np.array(priors)))  # evenly spaced: symmetric ties
        cases.append((grid, np.array(priors)))
    return cases


@pytest.mark.parametrize("epsilon", EPSILONS)
def test_dynamic_programme_matches_brute_force(epsilon: float) -> None:
    unique_checked = tied_checked = 0
    for grid, priors in brute_force_cases():
        maps = optimal_bins(priors, grid, epsilon)
        for row, prior in enumerate(priors):
            mean = prior @ grid
            variance = prior @ (grid - mean) ** 2
            # the library's tie tolerance, plus room for the brute force's own rounding (one-point priors)
            tolerance = 1e-9 * variance + 1e-20 * (1 + np.abs(grid).max()) ** 2
            bin_of, d, values, loss, chosen = rule_choice(prior, grid, epsilon, tolerance)
            assert maps.expected_loss[row] == pytest.approx(loss.min(), rel=1e-9, abs=1e-12 * (1 + variance))
            # The map found is the documented choice, and its loss from the definition is the optimum.
            np.testing.assert_array_equal(maps.bin_of[row], bin_of[chosen])
            assert maps.d[row] == d[chosen]
            np.testing.assert_allclose(
                maps.values[row, : d[chosen]], values[chosen, : d[chosen]], rtol=1e-10, atol=1e-10
            )
            assert np.all(np.isnan(maps.values[row, d[chosen] :]))
            order = np.sort(loss)
            if len(order) > 1 and order[1] > order[0] + 1e-6 * (variance + 1e-300):
                unique_checked += 1
            else:
                tied_checked += 1
            if variance == 0:  # one-point prior: a constant output is exact
                assert maps.d[row] == 1 and maps.expected_loss[row] == 0.0
                assert maps.values[row, 0] == grid[prior.argmax()]
    assert unique_checked >= 20 and tied_checked >= 10


def test_symmetric_tie_is_broken_by_the_documented_rule() -> None:
    # Uniform on 1..5 at eps = 1: {1,2}{3,4,5} and {1,2,3}{4,5} tie; the later bin starts earliest.
    maps = optimal_bins(np.full(5, 0.2), np.arange(1.0, 6.0), 1.0)
    np.testing.assert_array_equal(maps.bin_of[0], [0, 0, 1, 1, 1])
    assert maps.d[0] == 2


def test_maps_are_well_formed_on_a_large_grid_and_at_extreme_epsilon() -> None:
    rng = np.random.default_rng(5)
    grid = np.linspace(-3, 7, 50)
    priors = rng.dirichlet(np.full(50, 0.3), size=200)
    priors[:50] *= rng.random((50, 50)) < 0.3  # many zeros
    priors[:50, 25] += 1e-3
    priors /= priors.sum(axis=1, keepdims=True)
    for epsilon in (0.05, 1.0, 6.0, 40.0, 800.0):
        maps = optimal_bins(priors, grid, epsilon)
        steps = np.diff(maps.bin_of, axis=1)
        assert np.all(maps.bin_of[:, 0] == 0) and np.all((steps == 0) | (steps == 1))
        assert np.array_equal(maps.bin_of[:, -1], maps.d - 1)
        finite = np.arange(50)[None, :] < maps.d[:, None]
        assert np.all(np.isfinite(maps.values[finite])) and np.all(np.isnan(maps.values[~finite]))
        assert np.all(maps.expected_loss >= 0) and np.all(np.isfinite(maps.expected_loss))
        variance = ((grid - (priors @ grid)[:, None]) ** 2 * priors).sum(axis=1)
        assert np.all(maps.expected_loss <= variance * (1 + 1e-9))  # never worse than the constant mean
    with pytest.raises(ValueError):
        maps.d[0] = 3  # read-only


def test_translation_and_scale_of_the_grid() -> None:
    rng = np.random.default_rng(2)
    priors = rng.dirichlet(np.ones(8), size=20)
    grid = np.sort(rng.normal(size=8))
    base = optimal_bins(priors, grid, 1.5)
    moved = optimal_bins(priors, grid * 3.0 + 1e6, 1.5)
    np.testing.assert_array_equal(moved.bin_of, base.bin_of)
    np.testing.assert_allclose(moved.values, base.values * 3.0 + 1e6, rtol=1e-12)
    np.testing.assert_allclose(moved.expected_loss, base.expected_loss * 9.0, rtol=1e-6)


PRIORS6 = np.array(
    [
        [0.05, 0.1, 0.3, 0.25, 0.2, 0.1],
        [0.4, 0.0, 0.0, 0.1, 0.0, 0.5],  # zeros
        [0.0, 0.0, 0.0, 1.0, 0.0, 0.0],  # one point: d = 1
        [1 / 6] * 6,
        [0.02, 0.03, 0.05, 0.1, 0.3, 0.5],
    ]
)


def definition_probabilities(maps: BinMaps, epsilon: float) -> np.ndarray:
    """Pr[y -> bin b] from the definition, one example at a time: weight e^eps on the own bin and 1
    on each other bin among the d, normalised."""
    m, num_points = maps.bin_of.shape
    probs = np.zeros((m, num_points, num_points))
    for i in range(m):
        for y in range(num_points):
            weights = [math.exp(epsilon) if b == maps.bin_of[i, y] else 1.0 for b in range(maps.d[i])]
            for b, w in enumerate(weights):
                probs[i, y, b] = w / sum(weights)
    return probs


@pytest.mark.parametrize("epsilon", EPSILONS + [40.0])
def test_exact_probabilities(epsilon: float) -> None:
    exact = rr_on_bins_probabilities(PRIORS6, GRID6, epsilon)
    maps = optimal_bins(PRIORS6, GRID6, epsilon)
    assert exact.shape == (5, 6, 6)
    np.testing.assert_allclose(exact.sum(axis=2), 1.0, atol=1e-14)
    np.testing.assert_allclose(exact, definition_probabilities(maps, epsilon), rtol=1e-12, atol=1e-300)
    beyond = np.broadcast_to(np.arange(6)[None, None, :] >= maps.d[:, None, None], exact.shape)
    assert np.all(exact[beyond] == 0)
    np.testing.assert_array_equal(rr_on_bins_probabilities(maps, GRID6, epsilon), exact)


@pytest.mark.parametrize("epsilon", EPSILONS + [40.0])
def test_likelihood_ratio_is_bounded_by_e_eps_and_attained(epsilon: float) -> None:
    priors = np.concatenate([PRIORS6, np.random.default_rng(4).dirichlet(np.full(6, 0.5), size=20)])
    exact = rr_on_bins_probabilities(priors, GRID6, epsilon)
    d = optimal_bins(priors, GRID6, epsilon).d
    bound = math.exp(epsilon) * (1 + 1e-12)
    for y, y2 in itertools.permutations(range(6), 2):
        assert np.all(exact[:, y, :] <= bound * exact[:, y2, :])
    assert np.any(d >= 2) and np.any(d == 1)
    for i in np.flatnonzero(d >= 2):
        column = exact[i, :, : d[i]]
        np.testing.assert_allclose(column.max(axis=0) / column.min(axis=0), math.exp(epsilon), rtol=1e-12)
    assert np.all(exact[d == 1, :, 0] == 1.0)


@pytest.mark.parametrize("epsilon", [0.5, 2.0])
def test_empirical_distribution_matches_exact_probabilities(epsilon: float) -> None:
    draws = 4000
    rows = np.repeat(np.arange(len(PRIORS6)), 6 * draws)
    labels = np.tile(np.repeat(np.arange(6), draws), len(PRIORS6))
    values, released, d = rr_on_bins(labels, GRID6, PRIORS6, epsilon, rng=1, prior_index=rows)
    cells = released.reshape(-1, draws).T  # (draws, (prior, label) cell)
    maps = optimal_bins(PRIORS6, GRID6, epsilon)
    exact = rr_on_bins_probabilities(PRIORS6, GRID6, epsilon).reshape(-1, 6)
    assert frequencies_match(cells, exact).all()
    np.testing.assert_array_equal(values, maps.values[rows, released])
    np.testing.assert_array_equal(d, maps.d[rows])
    assert np.all(values[rows == 2] == 2.0)  # the one-point prior releases its point
    # Power: the same check rejects a sampler whose keep probability belongs to a 50% larger epsilon.
    keep, other = bins_module._keep_and_other(epsilon * 1.5, maps.d.astype(float))
    wrong = np.where(
        maps.bin_of[:, :, None] == np.arange(6),
        keep[:, None, None],
        np.where(np.arange(6) < maps.d[:, None, None], other[:, None, None], 0.0),
    )
    assert not frequencies_match(cells, wrong.reshape(-1, 6)).all()


def test_secure_generator_release() -> None:
    labels = np.repeat(np.arange(6), 3000)
    _, released, _ = rr_on_bins(labels, GRID6, PRIORS6[0], 1.0, rng="secure")
    exact = rr_on_bins_probabilities(PRIORS6[0], GRID6, 1.0)[0]
    assert frequencies_match(released.reshape(6, 3000).T, exact).all()


class ConstantUniforms(SecureGenerator):
    """A generator whose uniforms are all ``value``; integers come from a seeded numpy generator."""

    def __init__(self, value: float) -> None:
        self.value, self.numpy = value, np.random.default_rng(0)

    def random(self, size=None):
        return np.full(size, self.value)

    def integers(self, low, high=None, size=None):
        return self.numpy.integers(low, high, size)


@pytest.mark.parametrize("epsilon", [40.0, 100.0, 800.0])
def test_huge_epsilon_still_changes_labels_when_the_uniform_is_zero(epsilon: float) -> None:
    prior = np.array([0.5, 0.0, 0.0, 0.0, 0.0, 0.5])  # d >= 2 at every epsilon
    if epsilon < 700:  # the keep probability e^eps / (e^eps + 1) rounds to 1.0: U < keep would never drop
        assert math.exp(epsilon) / (math.exp(epsilon) + 1.0) == 1.0
    labels = np.repeat(np.arange(6), 10)
    maps = optimal_bins(prior, GRID6, epsilon)
    assert maps.d[0] >= 2
    _, released, _ = rr_on_bins(labels, GRID6, prior, epsilon, rng=ConstantUniforms(0.0))
    assert np.all(released != maps.bin_of[0, labels])  # U = 0 < q: every label is changed
    _, released, _ = rr_on_bins(labels, GRID6, prior, epsilon, rng=ConstantUniforms(2.0**-53))
    assert np.all(released == maps.bin_of[0, labels])  # one grid step up: q < 2^-53, kept


@pytest.mark.parametrize("epsilon", [0.3, 1.0, 3.0])
def test_drop_decision_is_u_below_q(epsilon: float) -> None:
    labels = np.arange(6)
    d = optimal_bins(PRIORS6[0], GRID6, epsilon).d[0]
    q = (d - 1) / (math.exp(epsilon) + d - 1)
    bin_of = optimal_bins(PRIORS6[0], GRID6, epsilon).bin_of[0]
    _, below, _ = rr_on_bins(labels, GRID6, PRIORS6[0], epsilon, rng=ConstantUniforms(q * (1 - 1e-9)))
    _, above, _ = rr_on_bins(labels, GRID6, PRIORS6[0], epsilon, rng=ConstantUniforms(q * (1 + 1e-9)))
    assert np.all(below != bin_of[labels]) and np.all(above == bin_of[labels])


class Tripwire(SecureGenerator):
    def random(self, size=None):
        raise AssertionError("randomness drawn before validation")

    def integers(self, low, high=None, size=None):
        raise AssertionError("randomness drawn before validation")


MAPS_EPS1 = optimal_bins(PRIORS6, GRID6, 1.0)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda rng: rr_on_bins([0, 6], GRID6, PRIORS6[0], 1.0, rng), r"labels must lie in \[0, 6\)"),
        (lambda rng: rr_on_bins([-1, 0], GRID6, PRIORS6[0], 1.0, rng), "labels must lie in"),
        (lambda rng: rr_on_bins([0.5], GRID6, PRIORS6[0], 1.0, rng), "labels must be integers"),
        (lambda rng: rr_on_bins([0, 1], GRID6[::-1], PRIORS6[0], 1.0, rng), "grid must be strictly increasing"),
        (lambda rng: rr_on_bins([0, 1], [0, 1, 1, 2, 3, 4], PRIORS6[0], 1.0, rng), "grid must be strictly increasing"),
        (lambda rng: rr_on_bins([0, 1], [0, 1, np.nan, 3, 4, 5], PRIORS6[0], 1.0, rng), "grid contains NaN"),
        (lambda rng: rr_on_bins([0], [[0, 1]], [0.5, 0.5], 1.0, rng), "grid must be a 1-d"),
        (lambda rng: rr_on_bins([0], [0.0], [1.0], 1.0, rng), "grid must have at least 2"),
        (lambda rng: rr_on_bins([0, 1], GRID6, PRIORS6[0] * 0.9, 1.0, rng), "priors must sum to 1|sum to 1"),
        (lambda rng: rr_on_bins([0, 1], GRID6, [1.5, -0.5, 0, 0, 0, 0], 1.0, rng), "non-negative"),
        (lambda rng: rr_on_bins([0, 1], GRID6, [0.5, 0.5], 1.0, rng), r"one entry per grid point \(6\)"),
        (lambda rng: rr_on_bins([0, 1, 2], GRID6, PRIORS6[:2], 1.0, rng), "length mismatch"),
        (lambda rng: rr_on_bins([0, 1, 2], GRID6, PRIORS6, 1.0, rng, prior_index=[0, 1]), "length mismatch"),
        (
            lambda rng: rr_on_bins([0, 1], GRID6, PRIORS6, 1.0, rng, prior_index=[0, 5]),
            r"prior_index must lie in \[0, 5\)",
        ),
        (lambda rng: rr_on_bins([0, 1], GRID6, PRIORS6[0], 0.0, rng), "epsilon must be a finite number > 0"),
        (lambda rng: rr_on_bins([0, 1], GRID6, PRIORS6[0], -1.0, rng), "epsilon must be a finite number > 0"),
        (lambda rng: rr_on_bins([0, 1], GRID6, PRIORS6[0], float("nan"), rng), "epsilon must be a finite number > 0"),
        (lambda rng: rr_on_bins([0, 1], GRID6, MAPS_EPS1, 2.0, rng, prior_index=[0, 1]), "computed for epsilon=1"),
        (lambda rng: rr_on_bins([0, 1], GRID6 + 1, MAPS_EPS1, 1.0, rng, prior_index=[0, 1]), "different grid"),
        (lambda rng: optimal_bins(PRIORS6, GRID6, float("inf")), "epsilon must be a finite number > 0"),
        (lambda rng: rr_on_bins_probabilities(PRIORS6[:, :5], GRID6, 1.0), "one entry per grid point"),
        (lambda rng: rr_on_bins_likelihood([1], GRID6, PRIORS6[2], 1.0), "not an RR-on-bins release"),
        (lambda rng: rr_on_bins_likelihood([0, 6], GRID6, PRIORS6[0], 1.0), "released_bins must lie in"),
        (lambda rng: rr_on_bins_likelihood([0, 1], GRID6, PRIORS6, 1.0, prior_index=[0]), "length mismatch"),
    ],
)
def test_bad_input_is_refused_before_any_randomness(call, message) -> None:
    with pytest.raises(ValueError, match=message):
        call(Tripwire())


def test_shared_per_example_and_indexed_priors_agree(monkeypatch) -> None:
    monkeypatch.setattr(bins_module, "_CHUNK_ENTRIES", 3 * 7**2)  # chunks of 3 priors: cross boundaries
    rng = np.random.default_rng(9)
    labels = rng.integers(0, 6, 40)
    for prior in PRIORS6:
        shared = optimal_bins(prior, GRID6, 1.2)
        tiled = optimal_bins(np.tile(prior, (40, 1)), GRID6, 1.2)
        mixed = optimal_bins(np.vstack([rng.dirichlet(np.ones(6), 4), prior, rng.dirichlet(np.ones(6), 4)]), GRID6, 1.2)
        for name in ("bin_of", "values", "d", "expected_loss"):
            single = getattr(shared, name)[0]
            np.testing.assert_array_equal(getattr(tiled, name), np.broadcast_to(single, getattr(tiled, name).shape))
            np.testing.assert_array_equal(getattr(mixed, name)[4], single)
        outputs = [
            rr_on_bins(labels, GRID6, prior, 1.2, rng=3),
            rr_on_bins(labels, GRID6, np.tile(prior, (40, 1)), 1.2, rng=3),
            rr_on_bins(labels, GRID6, np.vstack([PRIORS6, prior]), 1.2, rng=3, prior_index=np.full(40, 5)),
            rr_on_bins(labels, GRID6, shared, 1.2, rng=3),
        ]
        for other in outputs[1:]:
            for first, second in zip(outputs[0], other):
                np.testing.assert_array_equal(first, second)
    rows = rng.integers(0, 5, 40)
    _, released, d = rr_on_bins(labels, GRID6, PRIORS6, 1.2, rng=4, prior_index=rows)
    exact = rr_on_bins_probabilities(PRIORS6, GRID6, 1.2)
    likelihood = rr_on_bins_likelihood(released, GRID6, PRIORS6, 1.2, prior_index=rows)
    np.testing.assert_array_equal(likelihood, exact[rows, :, released])
    np.testing.assert_array_equal(
        rr_on_bins_likelihood(released, GRID6, optimal_bins(PRIORS6, GRID6, 1.2), 1.2, prior_index=rows), likelihood
    )
    np.testing.assert_array_equal(d, optimal_bins(PRIORS6, GRID6, 1.2).d[rows])


def test_uniform_ratings_beat_plain_rr_and_the_constant_mean() -> None:
    ratings = np.arange(1.0, 6.0)
    prior = np.full(5, 0.2)
    e = math.e
    plain_rr = sum(0.2 * (e if v == y else 1.0) / (e + 4) * (v - y) ** 2 for y in ratings for v in ratings)
    constant = prior @ (ratings - 3.0) ** 2  # 2.0
    bin_of, _, values, losses = brute_force_losses(prior, ratings, 1.0)
    assert np.array_equal(bin_of[-1], np.arange(5))  # single points, with optimal (shrunk) values
    assert losses[-1] < plain_rr and values[-1, 0] > 1.0
    maps = optimal_bins(prior, ratings, 1.0)
    assert maps.expected_loss[0] <= plain_rr and maps.expected_loss[0] <= constant
    assert maps.expected_loss[0] < 0.9 * min(plain_rr, constant)
    # The sampler's mean squared error agrees with the expected loss.
    labels = np.random.default_rng(0).integers(0, 5, 100_000)
    values, _, _ = rr_on_bins(labels, ratings, prior, 1.0, rng=1)
    errors = (values - ratings[labels]) ** 2
    assert abs(errors.mean() - maps.expected_loss[0]) < 5 * errors.std() / math.sqrt(errors.size)
