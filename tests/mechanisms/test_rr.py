"""Randomized response and RR-with-prior (mechanisms/rr.py) against their exact distributions and the
e^eps bound: the probabilities against the paper's algorithm, empirical frequencies, the choice of k,
likelihoods, the exact change decision at any epsilon, the sorting network, and bad input refused."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from labeldp.mechanisms import (
    change_probability,
    keep_probability,
    prior_top_k,
    randomized_response,
    randomized_response_likelihood,
    randomized_response_probabilities,
    rr_with_prior,
    rr_with_prior_likelihood,
    rr_with_prior_probabilities,
)
from labeldp.mechanisms import rr as rr_module
from labeldp.randomness import SecureGenerator, as_generator
from tests.helpers import frequencies_match

EPSILONS = [0.1, 0.5, 1.0, 2.0, 4.0]


def reference_rr_with_prior_probabilities(prior: np.ndarray, epsilon: float) -> np.ndarray:
    """Algorithm 2 written out for one prior row, straight from the paper (independent of the library)."""
    num_classes = prior.size
    order = sorted(range(num_classes), key=lambda label: (-prior[label], label))
    scores = [
        math.exp(epsilon) / (math.exp(epsilon) + k - 1) * sum(prior[order[:k]]) for k in range(1, num_classes + 1)
    ]
    k = 1 + max(range(num_classes), key=lambda i: (scores[i], -i))
    top = order[:k]
    probs = np.zeros((num_classes, num_classes))
    keep = math.exp(epsilon) / (math.exp(epsilon) + k - 1)
    for y in range(num_classes):
        for z in top:
            if y in top:
                probs[y, z] = keep if z == y else (1 - keep) / (k - 1)
            else:
                probs[y, z] = 1 / k
    return probs


PRIORS = np.array(
    [
        [0.1] * 10,  # uniform: plain RR over 10
        [1.0] + [0.0] * 9,  # certain prior: k = 1
        [0.45, 0.45] + [0.1 / 8] * 8,  # a tie at the top
        [0.3, 0.3, 0.3, 0.1] + [0.0] * 6,  # a three-way tie
        *np.random.default_rng(7).dirichlet(np.full(10, 0.3), size=6),
    ]
)


@pytest.mark.parametrize("epsilon", EPSILONS)
def test_rr_with_prior_probabilities_match_reference(epsilon: float) -> None:
    exact = rr_with_prior_probabilities(PRIORS, epsilon)
    for row, prior in enumerate(PRIORS):
        np.testing.assert_allclose(exact[row], reference_rr_with_prior_probabilities(prior, epsilon), atol=1e-12)
    np.testing.assert_allclose(exact.sum(axis=2), 1.0, atol=1e-12)


@pytest.mark.parametrize("epsilon", EPSILONS)
def test_likelihood_ratio_bounded_by_e_eps(epsilon: float) -> None:
    exact = rr_with_prior_probabilities(PRIORS, epsilon)
    bound = math.exp(epsilon) * (1 + 1e-12)
    for y, y2 in itertools.permutations(range(PRIORS.shape[1]), 2):
        assert np.all(exact[:, y, :] <= bound * exact[:, y2, :] + 1e-15)
    rr = randomized_response_probabilities(10, epsilon)
    assert rr.max(axis=0).max() / rr.min(axis=0).min() == pytest.approx(math.exp(epsilon))


def test_uniform_prior_is_plain_rr() -> None:
    exact = rr_with_prior_probabilities(np.full((1, 7), 1 / 7), 1.3)[0]
    np.testing.assert_allclose(exact, randomized_response_probabilities(7, 1.3))


@pytest.mark.parametrize("epsilon", [0.5, 2.0])
def test_rr_with_prior_empirical_distribution(epsilon: float) -> None:
    draws = 4000
    rows, labels = np.meshgrid(np.arange(len(PRIORS)), np.arange(10), indexing="ij")
    rows, labels = rows.ravel(), labels.ravel()  # every (prior row, true label) pair
    samples = np.stack([rr_with_prior(labels, PRIORS[rows], epsilon, rng=seed)[0] for seed in range(draws)])
    expected = rr_with_prior_probabilities(PRIORS, epsilon)[rows, labels]
    assert frequencies_match(samples, expected).all()


WIDE_PRIORS = np.array(
    [
        np.random.default_rng(40).dirichlet(np.full(40, 0.1)),  # peaked: k = 1
        np.random.default_rng(41).dirichlet(np.ones(40)),  # k of a few to ten
        np.full(40, 1 / 40),  # k = K: plain RR over 40
        np.where(np.arange(40) % 3 == 0, 1.0, 0.0) / 14,  # zeros: k = 14 at most
        np.eye(40)[7],  # certain prior: k = 1
    ]
)


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("epsilon", [0.5, 2.0])
def test_rr_with_prior_empirical_distribution_above_the_network_classes(
    order: str, epsilon: float, monkeypatch
) -> None:
    """K = 40, above the sorting network's classes: a changed label is found by flat indexes (C-ordered
    priors: the top-k mask comes out by row) or by counting candidates in label order (Fortran-ordered
    priors: the mask comes out by label); both release as Algorithm 2 says, with blocks prepared on
    worker threads, against the paper's probabilities written out (the K <= 32 path:
    test_rr_with_prior_empirical_distribution)."""
    from labeldp.mechanisms import _top_k

    monkeypatch.setattr(_top_k, "_PARALLEL_ENTRIES", 0)
    monkeypatch.setattr(_top_k, "worker_threads", lambda entries: 2)
    monkeypatch.setattr(rr_module, "_CHUNK_ENTRIES", 0)  # blocks of 8192 rows
    paths = set()
    block = rr_module.PriorBlock

    def recorded(*args):
        built = block(*args)
        paths.add(built.by_label)
        return built

    monkeypatch.setattr(rr_module, "PriorBlock", recorded)
    labels = np.array([0, 1, 7, 9, 20, 21, 30, 39])
    rows, true = np.meshgrid(np.arange(len(WIDE_PRIORS)), labels, indexing="ij")
    rows, true = rows.ravel(), true.ravel()  # every (prior row, true label) pair
    draws = 2000
    priors = np.tile(WIDE_PRIORS[rows], (draws, 1))
    released, k = rr_with_prior(np.tile(true, draws), np.asarray(priors, order=order), epsilon, rng=6)
    assert paths == {order == "F"}
    samples = released.reshape(draws, rows.size)
    expected = np.stack([reference_rr_with_prior_probabilities(WIDE_PRIORS[r], epsilon)[y] for r, y in zip(rows, true)])
    assert frequencies_match(samples, expected).all()
    assert np.array_equal(k[: rows.size], (expected > 0).sum(axis=1))


@pytest.mark.parametrize("epsilon", EPSILONS)
def test_randomized_response_empirical_distribution(epsilon: float) -> None:
    labels = np.repeat(np.arange(10), 2000)
    samples = randomized_response(labels, 10, epsilon, rng=0).reshape(10, 2000).T  # (draws, true label)
    assert frequencies_match(samples, randomized_response_probabilities(10, epsilon)).all()
    # The formula itself, independently of the helper: keep e^eps/(e^eps+K-1), others uniform.
    assert (samples == np.arange(10)).mean() == pytest.approx(math.exp(epsilon) / (math.exp(epsilon) + 9), abs=0.02)


def test_statistical_check_rejects_a_wrong_epsilon() -> None:
    """Power: the same check fails on a mechanism that keeps labels more often than it claims."""
    labels = np.repeat(np.arange(10), 2000)
    samples = randomized_response(labels, 10, 1.3, rng=0).reshape(10, 2000).T
    assert not frequencies_match(samples, randomized_response_probabilities(10, 1.0)).all()
    rows = np.repeat(np.arange(len(PRIORS)), 10)
    labels = np.tile(np.arange(10), len(PRIORS))
    samples = np.stack([rr_with_prior(labels, PRIORS[rows], 1.3, rng=s)[0] for s in range(2000)])
    assert not frequencies_match(samples, rr_with_prior_probabilities(PRIORS, 1.0)[rows, labels]).all()


def test_k_maximises_objective_with_smallest_k_on_ties() -> None:
    priors = np.random.default_rng(3).dirichlet(np.full(12, 0.5), size=500)
    for epsilon in EPSILONS:
        k, members = prior_top_k(priors, epsilon)
        desc = -np.sort(-priors, axis=1)
        objective = keep_probability(epsilon, np.arange(1, 13)) * np.cumsum(desc, axis=1)
        np.testing.assert_array_equal(k, objective.argmax(axis=1) + 1)
        np.testing.assert_array_equal(members.sum(axis=1), k)
        # the members are the k largest entries
        assert np.all(np.where(members, priors, np.inf).min(axis=1) >= np.where(members, -np.inf, priors).max(axis=1))


def test_large_inputs_and_chunk_boundaries() -> None:
    rng = np.random.default_rng(0)
    priors = rng.dirichlet(np.ones(5), size=20000)
    labels = rng.integers(0, 5, 20000)
    noisy, k = rr_with_prior(labels, priors, 50.0, rng=1)  # epsilon so large that RR keeps nearly always
    in_top = prior_top_k(priors, 50.0)[1][np.arange(20000), labels]
    assert np.all(noisy[in_top] == labels[in_top])
    assert np.all(k >= 1) and np.all(k <= 5)


def test_seeded_rng_reproducible_and_secure_rng_works() -> None:
    labels = np.arange(10).repeat(100)
    assert np.array_equal(randomized_response(labels, 10, 1.0, rng=5), randomized_response(labels, 10, 1.0, rng=5))
    samples = randomized_response(np.repeat(np.arange(4), 3000), 4, 1.0, rng="secure").reshape(4, 3000).T
    assert frequencies_match(samples, randomized_response_probabilities(4, 1.0)).all()
    noisy, _ = rr_with_prior(labels, np.full((1000, 10), 0.1), 1.0, rng=SecureGenerator())
    assert noisy.shape == (1000,)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: randomized_response([0, 10], 10, 1.0), "labels must lie in"),
        (lambda: randomized_response([-1, 0], 10, 1.0), "labels must lie in"),
        (lambda: randomized_response([0.5, 1.0], 10, 1.0), "must be integers"),
        (lambda: randomized_response([0, 1], 10, 0.0), "epsilon must be a finite number > 0"),
        (lambda: randomized_response([0, 1], 10, float("nan")), "epsilon must be a finite number > 0"),
        (lambda: randomized_response([0, 1], 10, -1), "epsilon"),
        (lambda: randomized_response([], 10, 1.0), "labels is empty"),
        (lambda: randomized_response([0, 1], 1, 1.0), "num_classes must be at least 2"),
        (lambda: rr_with_prior([0], [[0.5, 0.6]], 1.0), "sum to 1"),
        (lambda: rr_with_prior([0], [[1.5, -0.5]], 1.0), "non-negative"),
        (lambda: rr_with_prior([0], [[np.nan, 1.0]], 1.0), "NaN"),
        (lambda: rr_with_prior([0, 1], [[0.5, 0.5]], 1.0), "length mismatch"),
        (lambda: rr_with_prior([2], [[0.5, 0.5]], 1.0), "labels must lie in"),
        (lambda: rr_with_prior([0], [0.5, 0.5], 1.0), "2-d"),
        (lambda: as_generator("fast"), "rng must be"),
    ],
)
def test_bad_input_is_refused_with_a_clear_message(call, message) -> None:
    with pytest.raises((ValueError, TypeError), match=message):
        call()


@pytest.mark.parametrize("epsilon", [0.5, 2.0])
def test_likelihoods_are_columns_of_the_exact_probabilities(epsilon: float) -> None:
    rows = np.repeat(np.arange(len(PRIORS)), 10)
    labels = np.tile(np.arange(10), len(PRIORS))
    noisy, _ = rr_with_prior(labels, PRIORS[rows], epsilon, rng=0)
    exact = rr_with_prior_probabilities(PRIORS[rows], epsilon)
    np.testing.assert_allclose(
        rr_with_prior_likelihood(noisy, PRIORS[rows], epsilon), exact[np.arange(rows.size), :, noisy], atol=1e-12
    )
    rr_noisy = randomized_response(labels, 10, epsilon, rng=0)
    np.testing.assert_allclose(
        randomized_response_likelihood(rr_noisy, 10, epsilon),
        randomized_response_probabilities(10, epsilon)[:, rr_noisy].T,
    )
    with pytest.raises(ValueError, match="outside its prior's top k"):
        rr_with_prior_likelihood([5], [[1.0] + [0.0] * 9], epsilon)


class _ConstantUniforms(SecureGenerator):
    """A generator whose uniforms are all ``value``: the rare draws a sampler must get right."""

    def __init__(self, value: float):
        super().__init__()  # words for integers(); the uniforms are replaced
        self.value = value

    def random(self, size=None):
        return np.full(size, self.value)


@pytest.mark.parametrize("epsilon", [37.0, 40.0, 800.0])
def test_rr_changes_labels_at_any_epsilon(epsilon: float) -> None:
    """Above epsilon 36.7 (K = 2) e^eps / (e^eps + K - 1) rounds to 1.0 in float64; RR must not become
    the identity there. The uniform 0 (probability 2^-53) changes the label, so the realised epsilon
    stays finite and at most the recorded one."""
    labels = np.array([0, 1, 1, 0])
    assert np.array_equal(randomized_response(labels, 2, epsilon, _ConstantUniforms(0.0)), 1 - labels)
    noisy, k = rr_with_prior(labels, np.full((4, 2), 0.5), epsilon, _ConstantUniforms(0.0))
    assert np.all(k == 2) and np.array_equal(noisy, 1 - labels)
    assert 0 < change_probability(epsilon, 2) <= 1 / (1 + math.exp(min(epsilon, 700)))
    # one grid step up, every label is kept
    assert np.array_equal(randomized_response(labels, 2, epsilon, _ConstantUniforms(2.0**-53)), labels)


def test_realised_keep_probability_never_exceeds_the_nominal_one() -> None:
    """The change decision is U < q: at q's own 2^-53 grid point U keeps, one step below it changes."""
    for epsilon in (0.3, 5.0, 30.0):
        q = change_probability(epsilon, 10)
        on_grid = math.ceil(q * 2**53) / 2**53
        labels = np.zeros(3, dtype=int)
        assert np.array_equal(randomized_response(labels, 10, epsilon, _ConstantUniforms(on_grid)), labels)
        below = randomized_response(labels, 10, epsilon, _ConstantUniforms(on_grid - 2.0**-53))
        assert np.all(below != labels)


@pytest.mark.parametrize("num_classes", range(2, 18))
def test_sorting_network_sorts_every_zero_one_input(num_classes: int) -> None:
    """A comparator network sorts every input iff it sorts every 0-1 input (Knuth's 0-1 principle)."""
    from labeldp.mechanisms._top_k import _descending_rows

    bits = (np.arange(2**num_classes)[None, :] >> np.arange(num_classes)[:, None]) & 1
    rows = np.stack(_descending_rows(bits.astype(np.float64)))
    np.testing.assert_array_equal(rows, -np.sort(-bits, axis=0))


def test_rr_with_prior_block_size_and_sorting_path_do_not_change_seeded_releases(monkeypatch) -> None:
    """Blocks of any size (in whole runs of draws) and np.sort instead of the network give the same k,
    the same top-k sets and, with one seed, the same releases."""
    from labeldp.mechanisms import _top_k, rr

    rng = np.random.default_rng(11)
    priors = rng.dirichlet(np.full(10, 0.3), size=3 * rr._CHUNK_ROWS + 17)
    priors[:500] = np.round(priors[:500] * 4)  # ties at the threshold
    priors[:500, 0] += priors[:500].sum(axis=1) == 0
    priors[:500] /= priors[:500].sum(axis=1, keepdims=True)
    labels = rng.integers(0, 10, len(priors))
    reference = rr_with_prior(labels, priors, 1.0, rng=3)
    top = prior_top_k(priors, 1.0)
    for entries, network in ((0, 32), (rr._CHUNK_ROWS * 20, 32), (1 << 30, 0)):
        monkeypatch.setattr(rr, "_CHUNK_ENTRIES", entries)
        monkeypatch.setattr(_top_k, "_NETWORK_CLASSES", network)
        for got, want in zip(rr_with_prior(labels, priors, 1.0, rng=3) + prior_top_k(priors, 1.0), reference + top):
            np.testing.assert_array_equal(got, want)


def reference_seeded_releases(labels: np.ndarray, priors: np.ndarray, epsilon: float, gen) -> np.ndarray:
    """RR-with-prior's releases for a generator, written out plainly: each row's top k from a stable sort
    and numpy's argmax, then, in runs of 8192 rows, the run's uniforms (a label changes when its uniform
    falls below the change probability) and the ranks of the released labels among the other members
    in label order. rr_with_prior draws exactly this way, so a seed gives exactly these releases."""
    num_classes = priors.shape[1]
    weights = keep_probability(epsilon, np.arange(1, num_classes + 1))
    order = np.argsort(-priors, axis=1, kind="stable")  # lower labels first among equal entries
    k = (weights * np.cumsum(np.take_along_axis(priors, order, axis=1), axis=1)).argmax(axis=1) + 1
    released = labels.copy()
    for start in range(0, len(labels), 8192):
        rows = np.arange(start, min(start + 8192, len(labels)))
        members = [sorted(order[i, : k[i]]) for i in rows]
        in_top = np.array([labels[i] in top for i, top in zip(rows, members)])
        changed = gen.random(rows.size) < change_probability(epsilon, k[rows])
        redraw = np.flatnonzero(changed | ~in_top)
        ranks = gen.integers(0, k[rows][redraw] - in_top[redraw]) if redraw.size else []
        for j, rank in zip(redraw, ranks):
            released[rows[j]] = [c for c in members[j] if c != labels[rows[j]]][rank]
    return released


@pytest.mark.parametrize("num_classes", [3, 10, 40])
def test_seeded_releases_follow_the_documented_draws(num_classes: int, monkeypatch) -> None:
    """The same seed gives the same releases as the plain reference (ties at the threshold included),
    with the top-k sets computed on the calling thread or on worker threads."""
    from labeldp.mechanisms import _top_k

    rng = np.random.default_rng(num_classes)
    priors = rng.dirichlet(np.full(num_classes, 0.3), size=20000)
    priors[:3000] = np.round(priors[:3000] * 3)  # ties
    priors[:3000, 0] += priors[:3000].sum(axis=1) == 0
    priors[:3000] /= priors[:3000].sum(axis=1, keepdims=True)
    labels = rng.integers(0, num_classes, len(priors))
    for epsilon in (0.5, 2.0):
        expected = reference_seeded_releases(labels, priors, epsilon, np.random.default_rng(4))
        np.testing.assert_array_equal(rr_with_prior(labels, priors, epsilon, rng=4)[0], expected)
    monkeypatch.setattr(_top_k, "_PARALLEL_ENTRIES", 0)
    monkeypatch.setattr(_top_k, "worker_threads", lambda entries: 3)
    monkeypatch.setattr(rr_module, "_CHUNK_ENTRIES", 0)  # blocks of 8192 rows: several per thread
    np.testing.assert_array_equal(rr_with_prior(labels, priors, 2.0, rng=4)[0], expected)
    np.testing.assert_array_equal(prior_top_k(priors, 2.0)[1], reference_members(priors, 2.0))


def reference_members(priors: np.ndarray, epsilon: float) -> np.ndarray:
    """The top-k sets from a stable sort and numpy's argmax (see reference_seeded_releases)."""
    num_classes = priors.shape[1]
    order = np.argsort(-priors, axis=1, kind="stable")
    objective = keep_probability(epsilon, np.arange(1, num_classes + 1)) * np.cumsum(
        np.take_along_axis(priors, order, axis=1), axis=1
    )
    ranks = np.argsort(order, axis=1)
    return ranks <= objective.argmax(axis=1, keepdims=True)


@pytest.mark.parametrize("epsilon", [1e-3, 0.5, 3.0, 36.0, 700.0, 740.0, 800.0])
def test_the_scan_for_k_stops_early_only_where_no_later_k_can_win(epsilon: float, monkeypatch) -> None:
    """k is the first maximiser of the objective as numpy computes it (sequential sums of the sorted
    entries), on rows built so that the objectives of k, k + 1, ... tie up to rounding (a plateau,
    where rounding alone decides which is largest), on rows with zeros and equal entries, and at
    epsilons where e^-eps is subnormal or 0. The scan over k stops early for a block (here: one row)
    only once no later k can win, so every k and top-k set is the full scan's."""
    monkeypatch.setattr(rr_module, "_CHUNK_ROWS", 1)
    monkeypatch.setattr(rr_module, "_CHUNK_ENTRIES", 0)
    rng = np.random.default_rng(int(epsilon * 1000))
    rows = []
    c = math.exp(-epsilon)
    for num_classes in (2, 5, 10, 33, 100):
        for _ in range(300):
            k = int(rng.integers(1, num_classes))
            top = np.sort(rng.random(k))[::-1] + 1.0
            if c > 0:  # entries at which the objectives of k, k+1, ... are equal in real numbers: a plateau
                tie = min(top[-1], top.sum() / (k + 1 / c - 1))
                top = np.append(top, [tie] * min(int(rng.integers(1, 5)), num_classes - k))
            row = np.concatenate([top, rng.random(num_classes - top.size) * top[-1] * rng.choice([0.0, 1e-3, 1.0])])
            rows.append((num_classes, rng.permutation(row / row.sum())))
    for num_classes in (2, 5, 10, 33, 100):
        priors = np.array([row for size, row in rows if size == num_classes] + [np.full(num_classes, 1 / num_classes)])
        k, members = prior_top_k(priors, epsilon)
        expected = reference_members(priors, epsilon)
        np.testing.assert_array_equal(k, expected.sum(axis=1))
        np.testing.assert_array_equal(members, expected)
