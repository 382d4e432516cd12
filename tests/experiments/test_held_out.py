"""The held-out scorer (experiments/held_out.py): ALIBI's and VLP's scores are unbiased for the clean
accuracy, and the share of held-out releases that do not depend on the label is counted."""

from __future__ import annotations

import math

import numpy as np
import pytest

from labeldp.boundary import Release
from labeldp.experiments.held_out import HeldOutScorer, uninformative_message
from labeldp.mechanisms import (
    laplace_one_hot,
    laplace_one_hot_likelihood,
    rr_with_prior,
    rr_with_prior_likelihood,
    vector_labels,
    vector_labels_likelihood,
    vector_labels_one_hot_estimate,
)


def test_alibi_scorer_is_unbiased() -> None:
    """ALIBI's held-out score, the noisy one-hot vector's entry at the prediction, averages to the clean
    accuracy."""
    rng = np.random.default_rng(2)
    n, k = 1000, 10
    true = rng.integers(0, k, n)
    predictions = np.where(rng.random(n) < 0.7, true, (true + 1) % k)
    held = np.arange(n)
    estimates = []
    for seed in range(200):
        noisy = laplace_one_hot(true, k, 2.0, seed)
        release = Release(
            held, None, "alibi", noisy.argmax(axis=1), laplace_one_hot_likelihood(noisy, 2.0), {"noisy_one_hot": noisy}
        )
        estimates.append(HeldOutScorer({"stage1": release}, held, n, k).terms(predictions).mean())
    assert abs(np.mean(estimates) - np.mean(predictions == true)) < 4 * np.std(estimates) / math.sqrt(200)


def test_vlp_scorer_is_unbiased() -> None:
    """VLP releases vectors and no label: its held-out score, the debiased vector's entry at the prediction,
    averages to the clean accuracy."""
    rng = np.random.default_rng(3)
    n, k = 1000, 10
    true = rng.integers(0, k, n)
    predictions = np.where(rng.random(n) < 0.7, true, (true + 1) % k)
    held = np.arange(n)
    estimates = []
    for seed in range(200):
        z = vector_labels(true, k, 2.0, seed)
        arrays = {"vectors": z, "noisy_one_hot": vector_labels_one_hot_estimate(z, 2.0)}
        release = Release(held, None, "vlp", None, vector_labels_likelihood(z, 2.0), arrays)
        scorer = HeldOutScorer({"stage1": release}, held, n, k)
        assert scorer.alibi.all() and scorer.uninformative == 0.0
        estimates.append(scorer.terms(predictions).mean())
    assert abs(np.mean(estimates) - np.mean(predictions == true)) < 4 * np.std(estimates) / math.sqrt(200)


def test_the_scorer_counts_releases_that_do_not_depend_on_the_label() -> None:
    """RR-with-prior with k = 1 releases the prior's top class whatever the label: the scorer reports
    the share of such held-out examples (a tune warns above half), and plain RR has none."""
    rng = np.random.default_rng(0)
    n, k = 400, 10
    true = rng.integers(0, k, n)
    priors = np.full((n, k), 0.01 / (k - 1))
    priors[np.arange(n), true] = 0.99
    priors[:100] = 1.0 / k  # a quarter with a flat prior: randomized response over every class
    noisy, _ = rr_with_prior(true, priors, 0.5, 1)
    release = Release(np.arange(n), None, "rr-with-prior", noisy, rr_with_prior_likelihood(noisy, priors, 0.5))
    scorer = HeldOutScorer({"stage1": release}, np.arange(n), n, k)
    assert scorer.uninformative == pytest.approx(0.75)
    assert "75% of the held-out examples were released with k = 1" in uninformative_message(0.75)
