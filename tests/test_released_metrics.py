"""Metrics estimated on released labels (released_metrics.py): the clean-accuracy estimate is unbiased
under RR and under RR-with-prior (where every clean label is in its top-k set), and is as documented
outside the top k."""

from __future__ import annotations

import math

import numpy as np

from labeldp.estimators import ReleasedLabels, clean_accuracy_estimate
from labeldp.mechanisms import (
    keep_probability,
    prior_top_k,
    randomized_response,
    randomized_response_likelihood,
    rr_with_prior,
    rr_with_prior_likelihood,
)
from labeldp.released_metrics import clean_accuracy_terms


def test_clean_accuracy_estimate_is_unbiased() -> None:
    """Over many RR releases of the same labels, the estimate averages to the accuracy on the clean
    labels (and the agreement with the released labels does not)."""
    rng = np.random.default_rng(4)
    true = rng.integers(0, 3, 2000)
    predictions = np.where(rng.random(2000) < 0.7, true, (true + 1) % 3)
    accuracy = float(np.mean(predictions == true))
    estimates, agreements = [], []
    for seed in range(300):
        noisy = randomized_response(true, 3, 1.0, rng=seed)
        release = ReleasedLabels(noisy, randomized_response_likelihood(noisy, 3, 1.0), ["a", "b", "c"])
        estimates.append(clean_accuracy_estimate(predictions, release))
        agreements.append(np.mean(predictions == noisy))
    spread = np.std(estimates) / math.sqrt(len(estimates))
    assert abs(np.mean(estimates) - accuracy) < 4 * spread
    assert abs(np.mean(agreements) - accuracy) > 20 * spread
    assert keep_probability(1.0, 3) < 1


EPSILON = 1.0


def _rr_with_prior_case(outside: float, seed: int = 0):
    """Labels, priors whose top-k sets hold each label except for a fraction ``outside``, and predictions."""
    rng = np.random.default_rng(seed)
    n, k = 2000, 5
    true = rng.integers(0, k, n)
    other = (true + rng.integers(1, k, n)) % k
    far = (true + rng.integers(1, k, n)) % k  # a third label, outside the top two where it differs from other
    far = np.where(far == other, (other + 1) % k, far)
    far = np.where(far == true, (far + 1) % k, far)
    moved = rng.random(n) < outside  # the prior's two heavy labels miss the true one
    first = np.where(moved, far, true)
    priors = np.full((n, k), 0.1 / 3)
    priors[np.arange(n), first] = 0.45
    priors[np.arange(n), other] = 0.45
    u = rng.random(n)
    predictions = np.where(u < 0.6, true, np.where(u < 0.8, other, (true + other + 1) % k))
    return true, priors, predictions


def _mean_estimate(true, priors, predictions, releases=300):
    estimates = []
    for seed in range(releases):
        noisy, _ = rr_with_prior(true, priors, EPSILON, seed)
        terms = clean_accuracy_terms(predictions, noisy, rr_with_prior_likelihood(noisy, priors, EPSILON))
        estimates.append(terms.mean())
    return float(np.mean(estimates)), float(np.std(estimates) / math.sqrt(releases)), terms


def test_clean_accuracy_estimate_is_unbiased_for_rr_with_prior() -> None:
    """With every clean label in its top-k set, the per-example channel-corrected indicators average
    to the clean accuracy over many RR-with-prior releases, and their standard error is the spread's."""
    true, priors, predictions = _rr_with_prior_case(outside=0.0)
    k, member = prior_top_k(priors, EPSILON)
    assert np.all(k == 2) and member[np.arange(true.size), true].all()
    accuracy = float(np.mean(predictions == true))
    mean, spread, terms = _mean_estimate(true, priors, predictions)
    assert abs(mean - accuracy) < 4 * spread
    one_release_error = terms.std(ddof=1) / math.sqrt(terms.size)
    assert 0.5 < one_release_error / (spread * math.sqrt(300)) < 2


def test_clean_accuracy_estimate_outside_the_top_k_is_as_documented() -> None:
    """A clean label outside its top-k set releases the same thing whatever it is: such an example adds
    1/k (prediction inside the set) or 0 to the expectation, as clean_accuracy_terms says."""
    true, priors, predictions = _rr_with_prior_case(outside=0.3, seed=1)
    k, member = prior_top_k(priors, EPSILON)
    rows = np.arange(true.size)
    inside, predicted_inside = member[rows, true], member[rows, predictions]
    expected = np.mean(np.where(inside, predictions == true, predicted_inside / k))
    mean, spread, _ = _mean_estimate(true, priors, predictions)
    assert abs(mean - expected) < 4 * spread
    assert abs(mean - np.mean(predictions == true)) > 10 * spread  # not the clean accuracy: not identifiable
