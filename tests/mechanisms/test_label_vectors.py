"""Vector label privacy (mechanisms/label_vectors.py) against its exact distribution and the e^eps bound:
each coordinate's frequency and the frequency of every whole vector, the likelihood ratio of every vector
between every two labels, the likelihoods and the unbiased one-hot estimate, the realised epsilon at any
epsilon, and bad input refused."""

from __future__ import annotations

import itertools
import math

import mpmath
import numpy as np
import pytest

from labeldp.mechanisms import label_vectors as vector_module
from labeldp.mechanisms import (
    randomized_response_probabilities,
    rr_information,
    vector_flip_probability,
    vector_information,
    vector_labels,
    vector_labels_likelihood,
    vector_labels_log_probability,
    vector_labels_one_hot_estimate,
    vector_labels_probabilities,
)
from labeldp.randomness import SecureGenerator
from tests.helpers import frequencies_match

EPSILONS = [0.1, 0.5, 1.0, 2.0, 4.0]


def every_vector(num_classes: int) -> np.ndarray:
    """All 2^K binary vectors, row v the bits of v (coordinate j: bit j)."""
    return (np.arange(2**num_classes)[:, None] >> np.arange(num_classes)) & 1


def reference_probability(vector, label: int, epsilon: float) -> float:
    """Pr[Z = vector | label], written out from the paper's definition (independent of the library)."""
    p = math.exp(epsilon / 2) / (1 + math.exp(epsilon / 2))
    probability = 1.0
    for j, bit in enumerate(vector):
        one = p if j == label else 1 - p
        probability *= one if bit else 1 - one
    return probability


@pytest.mark.parametrize("epsilon", EPSILONS)
def test_the_exact_probabilities_match_the_definition(epsilon: float) -> None:
    vectors = every_vector(4)
    exact = np.exp(vector_labels_log_probability(vectors, epsilon))
    reference = np.array([[reference_probability(v, y, epsilon) for y in range(4)] for v in vectors])
    np.testing.assert_allclose(exact, reference, rtol=1e-12)
    np.testing.assert_allclose(exact.sum(axis=0), 1.0, atol=1e-12)  # a distribution under every label
    p = math.exp(epsilon / 2) / (1 + math.exp(epsilon / 2))
    np.testing.assert_allclose(vector_labels_probabilities(4, epsilon), np.where(np.eye(4) > 0, p, 1 - p))


def mutual_information(joint: np.ndarray) -> float:
    """I(Y; Z) in bits of a joint distribution (rows Y, columns Z), summed term by term."""
    outer = joint.sum(axis=1, keepdims=True) * joint.sum(axis=0, keepdims=True)
    inside = joint > 0
    return float(np.sum(joint[inside] * np.log2(joint[inside] / outer[inside])))


@pytest.mark.parametrize("num_classes", [2, 3, 5, 8])
@pytest.mark.parametrize("epsilon", EPSILONS)
def test_information_is_the_mutual_information_of_every_vector_and_label(num_classes: int, epsilon: float) -> None:
    vectors = every_vector(num_classes)
    joint = np.array([[reference_probability(v, y, epsilon) for v in vectors] for y in range(num_classes)])
    assert vector_information(num_classes, epsilon) == pytest.approx(mutual_information(joint / num_classes), abs=1e-12)
    rr = randomized_response_probabilities(num_classes, epsilon) / num_classes
    assert rr_information(num_classes, epsilon) == pytest.approx(mutual_information(rr), abs=1e-12)


@pytest.mark.parametrize(("num_classes", "epsilon"), [(100, 1e-6), (1000, 1e-4), (3, 1e-6), (10, 30.0)])
def test_information_holds_its_precision_where_terms_cancel(num_classes: int, epsilon: float) -> None:
    """Against the entropy form over the counts of ones, in 60 digits (I(Y; Z) is about 1e-13 at 1e-6)."""
    with mpmath.workdps(60):  # this test's precision only: dp_accounting and other tests keep the default
        eps, k = mpmath.mpf(epsilon), num_classes
        p = mpmath.exp(eps / 2) / (1 + mpmath.exp(eps / 2))
        q = 1 - p
        entropy = 0
        for m in range(k + 1):  # Pr[z] for a vector of m ones: the label among its ones, or among its zeros
            pz = (
                (m * p ** (k - m + 1) * q ** (m - 1) if m else 0)
                + ((k - m) * q ** (m + 1) * p ** (k - 1 - m) if m < k else 0)
            ) / k
            entropy -= mpmath.binomial(k, m) * pz * mpmath.log(pz)
        exact = float((entropy + k * (p * mpmath.log(p) + q * mpmath.log(q))) / mpmath.log(2))
        assert vector_information(num_classes, epsilon) == pytest.approx(exact, rel=1e-6)
        keep, other = mpmath.exp(eps) / (mpmath.exp(eps) + k - 1), 1 / (mpmath.exp(eps) + k - 1)
        exact = float((mpmath.log(k) + keep * mpmath.log(keep) + (k - 1) * other * mpmath.log(other)) / mpmath.log(2))
    assert rr_information(num_classes, epsilon) == pytest.approx(exact, rel=1e-6)


def test_vectors_tell_more_than_rr_below_a_crossing_that_grows_with_the_classes() -> None:
    def more(k: int, epsilon: float) -> bool:
        return vector_information(k, epsilon) > rr_information(k, epsilon)

    assert not any(more(k, e) for k in (2, 3, 4) for e in (0.05, 0.5, 1.0, 2.0, 8.0))
    assert more(10, 1.99) and not more(10, 2.0) and more(100, 4.9) and not more(100, 5.0)
    assert vector_information(10, 1.0) == pytest.approx(0.158, abs=5e-4)  # the figures docs/methods.md quotes
    assert rr_information(10, 1.0) == pytest.approx(0.106, abs=5e-4)
    assert vector_information(10, 5000.0) == pytest.approx(math.log2(10))  # no underflow at any epsilon
    assert rr_information(10, 5000.0) == pytest.approx(math.log2(10))


@pytest.mark.parametrize("epsilon", EPSILONS)
def test_likelihood_ratio_bounded_by_e_eps_and_reached(epsilon: float) -> None:
    """Over every vector of K = 5 and every two labels, Pr[z | a] / Pr[z | b] <= e^eps, with equality for
    z_a = 1, z_b = 0: the guarantee is exactly epsilon."""
    log_exact = vector_labels_log_probability(every_vector(5), epsilon)
    worst = max(np.max(log_exact[:, a] - log_exact[:, b]) for a, b in itertools.permutations(range(5), 2))
    assert worst <= epsilon * (1 + 1e-12)
    assert worst == pytest.approx(epsilon, rel=1e-12)


@pytest.mark.parametrize("epsilon", [0.5, 2.0])
def test_coordinates_follow_their_exact_probabilities(epsilon: float) -> None:
    """Every coordinate of every label's vector is 1 as often as P[y, j] says (exact binomial tails)."""
    draws, num_classes = 4000, 6
    labels = np.tile(np.arange(num_classes), draws)
    z = vector_labels(labels, num_classes, epsilon, rng=3).reshape(draws, num_classes, num_classes)
    exact = vector_labels_probabilities(num_classes, epsilon)  # (y, j): Pr[Z_j = 1 | y]
    samples = z.reshape(draws, num_classes * num_classes).astype(np.int64)  # cell (y, j): 0 or 1
    expected = np.stack([1 - exact.ravel(), exact.ravel()], axis=1)
    assert frequencies_match(samples, expected).all()


@pytest.mark.parametrize("epsilon", [0.5, 2.0])
def test_whole_vectors_follow_their_exact_distribution(epsilon: float) -> None:
    """The coordinates are independent: each of the 2^K vectors of K = 4 appears as often as Pr[z | y] says."""
    draws, num_classes = 20000, 4
    labels = np.tile(np.arange(num_classes), draws)
    z = vector_labels(labels, num_classes, epsilon, rng=4)
    codes = (z.astype(np.int64) << np.arange(num_classes)).sum(axis=1).reshape(draws, num_classes)
    expected = np.exp(vector_labels_log_probability(every_vector(num_classes), epsilon)).T  # (y, vector)
    assert frequencies_match(codes, expected).all()


def test_statistical_check_rejects_a_wrong_epsilon() -> None:
    """Power: the same check fails on vectors drawn at another epsilon."""
    draws, num_classes = 20000, 4
    labels = np.tile(np.arange(num_classes), draws)
    z = vector_labels(labels, num_classes, 1.3, rng=4)
    codes = (z.astype(np.int64) << np.arange(num_classes)).sum(axis=1).reshape(draws, num_classes)
    expected = np.exp(vector_labels_log_probability(every_vector(num_classes), 1.0)).T
    assert not frequencies_match(codes, expected).all()


@pytest.mark.parametrize("epsilon", [0.5, 2.0])
def test_likelihood_is_the_exact_probability_normalised(epsilon: float) -> None:
    z = vector_labels(np.arange(50) % 7, 7, epsilon, rng=1)
    exact = np.exp(vector_labels_log_probability(z, epsilon))
    np.testing.assert_allclose(vector_labels_likelihood(z, epsilon), exact / exact.sum(axis=1, keepdims=True))
    # proportional to e^(eps z_y): the forward loss's evidence
    scaled = vector_labels_likelihood(z, epsilon) * np.exp(-epsilon * z)
    np.testing.assert_allclose(scaled, np.broadcast_to(scaled[:, :1], scaled.shape))


def test_one_hot_estimate_is_unbiased() -> None:
    labels = np.tile(np.arange(5), 40000)
    estimate = vector_labels_one_hot_estimate(vector_labels(labels, 5, 1.0, rng=2), 1.0)
    means = estimate.reshape(40000, 5, 5).mean(axis=0)  # (y, j)
    spread = estimate.reshape(40000, 5, 5).std(axis=0) / math.sqrt(40000)
    assert np.all(np.abs(means - np.eye(5)) < 5 * spread)


def test_chunks_do_not_change_a_seeded_draw(monkeypatch) -> None:
    labels = np.arange(1000) % 9
    whole = vector_labels(labels, 9, 1.0, rng=8)
    monkeypatch.setattr(vector_module, "_CHUNK_ENTRIES", 7 * 9)  # seven rows at a time
    assert np.array_equal(vector_labels(labels, 9, 1.0, rng=8), whole)
    z = vector_labels(np.repeat(np.arange(3), 3000), 3, 1.0, rng=SecureGenerator())
    assert z.shape == (9000, 3) and z.dtype == np.uint8


class _ConstantUniforms(SecureGenerator):
    """A generator whose uniforms are all ``value``: the rare draws a sampler must get right."""

    def __init__(self, value: float):
        super().__init__()
        self.value = value

    def random(self, size=None):
        return np.full(size, self.value)


@pytest.mark.parametrize("epsilon", [1.0, 80.0, 800.0, 5000.0])
def test_coordinates_flip_at_any_epsilon(epsilon: float) -> None:
    """The flip probability stays above 0 where e^(eps/2) overflows, and a uniform at the smallest grid
    value flips every coordinate: no coordinate is an identity recorded as finite epsilon."""
    q = vector_flip_probability(epsilon)
    assert 0 < q <= 0.5
    assert 2 * math.log((1 - q) / q) <= epsilon * (1 + 1e-12) or q == np.nextafter(0.0, 1.0)
    z = vector_labels([0, 1], 2, epsilon, rng=_ConstantUniforms(0.0))
    assert np.array_equal(z, [[0, 1], [1, 0]])
    z = vector_labels([0, 1], 2, epsilon, rng=_ConstantUniforms(0.5))
    assert np.array_equal(z, [[1, 0], [0, 1]])


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: vector_labels([0, 10], 10, 1.0), "labels must lie in"),
        (lambda: vector_labels([0.5, 1.0], 10, 1.0), "must be integers"),
        (lambda: vector_labels([0, 1], 10, 0.0), "epsilon must be a finite number > 0"),
        (lambda: vector_labels([0, 1], 1, 1.0), "num_classes must be at least 2"),
        (lambda: vector_labels([], 10, 1.0), "labels is empty"),
        (lambda: vector_labels_likelihood([[0, 2]], 1.0), "0s and 1s"),
        (lambda: vector_labels_likelihood([0, 1], 1.0), "0s and 1s"),
        (lambda: vector_labels_one_hot_estimate([[0, 1]], -1.0), "epsilon"),
    ],
)
def test_bad_input_is_refused_with_a_clear_message(call, message) -> None:
    with pytest.raises((ValueError, TypeError), match=message):
        call()
