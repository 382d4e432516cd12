"""The keyed kernel (mechanisms/keyed.py): a pure function of the key and each row's identity, drawing RR's and
RR-with-prior's exact distributions (the e^eps bound with them), the key unguessable from the releases."""

from __future__ import annotations

import os

import numpy as np
import pytest

from labeldp.mechanisms import randomized_response_probabilities, rr_with_prior_probabilities
from labeldp.mechanisms.keyed import keyed_randomized_response, keyed_rr_with_prior, row_words
from tests.helpers import frequencies_match
from tests.mechanisms.test_rr import PRIORS, WIDE_PRIORS, reference_rr_with_prior_probabilities


def _identities(n: int, start: int = 0) -> np.ndarray:
    identity = np.zeros((n, 2), dtype=np.uint64)
    identity[:, 0] = np.arange(start, start + n)
    return identity


def test_a_row_is_released_the_same_however_often_and_in_whatever_company_it_is_drawn() -> None:
    """Recomputed alone, in another block, in another order: the same release; another key: another release."""
    key, labels = os.urandom(16), np.arange(1000) % 7
    identity = _identities(1000)
    whole = keyed_randomized_response(labels, 7, 1.0, row_words(key, identity))
    order = np.random.default_rng(0).permutation(1000)
    shuffled = keyed_randomized_response(labels[order], 7, 1.0, row_words(key, identity[order]))
    part = keyed_randomized_response(labels[500:], 7, 1.0, row_words(key, identity[500:]))
    assert np.array_equal(shuffled, whole[order]) and np.array_equal(part, whole[500:])
    assert not np.array_equal(keyed_randomized_response(labels, 7, 1.0, row_words(os.urandom(16), identity)), whole)


@pytest.mark.parametrize("num_classes", [2, 10, 40])
@pytest.mark.parametrize("epsilon", [0.5, 2.0])
def test_keyed_rr_draws_rr_s_exact_distribution(num_classes: int, epsilon: float) -> None:
    draws = 2000
    labels = np.tile(np.arange(num_classes), draws)
    released = keyed_randomized_response(
        labels, num_classes, epsilon, row_words(os.urandom(16), _identities(labels.size))
    )
    samples = released.reshape(draws, num_classes)
    expected = randomized_response_probabilities(num_classes, epsilon)
    assert frequencies_match(samples, expected).all()
    assert not frequencies_match(samples, randomized_response_probabilities(num_classes, epsilon + 1.0)).all()  # power


@pytest.mark.parametrize("priors", [PRIORS, WIDE_PRIORS], ids=["K=10", "K=40"])
@pytest.mark.parametrize("epsilon", [0.5, 2.0])
def test_keyed_rr_with_prior_draws_the_paper_s_distribution(priors: np.ndarray, epsilon: float) -> None:
    num_classes, draws = priors.shape[1], 1500
    rows, true = np.meshgrid(np.arange(len(priors)), np.arange(num_classes), indexing="ij")
    rows, true = rows.ravel(), true.ravel()  # every (prior row, true label) pair
    words = row_words(os.urandom(16), _identities(rows.size * draws))
    released, k = keyed_rr_with_prior(np.tile(true, draws), np.tile(priors[rows], (draws, 1)), epsilon, words)
    expected = np.stack([reference_rr_with_prior_probabilities(priors[r], epsilon)[y] for r, y in zip(rows, true)])
    assert frequencies_match(released.reshape(draws, rows.size), expected).all()
    assert np.array_equal(k[: rows.size], (expected > 0).sum(axis=1))
    np.testing.assert_allclose(rr_with_prior_probabilities(priors, epsilon)[rows, true], expected, atol=1e-12)


def test_the_likelihood_ratio_of_any_release_is_within_e_to_the_epsilon() -> None:
    """Frequencies of each release under each true label, from one key: their ratios within e^eps (what the
    exact distribution gives), so the rows' noise is the mechanism's, not a correlated draw."""
    epsilon, draws = 1.0, 20_000
    labels = np.repeat(np.arange(4), draws)
    released = keyed_randomized_response(labels, 4, epsilon, row_words(os.urandom(16), _identities(labels.size)))
    frequency = np.stack([np.bincount(released[labels == y], minlength=4) / draws for y in range(4)])
    assert (frequency.max(axis=0) / frequency.min(axis=0)).max() < np.exp(epsilon) * 1.1
