"""Metrics estimated on released labels (released_metrics.py): the clean-accuracy estimate is unbiased
under RR and under RR-with-prior (where every clean label is in its top-k set), and is as documented
outside the top k."""

from __future__ import annotations

import math

import numpy as np

from labeldp.estimators import ReleasedLabels, clean_accuracy_estimate
from labeldp.mechanisms import keep_probability, randomized_response, randomized_response_likelihood


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
