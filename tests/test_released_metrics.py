"""Metrics estimated on released labels (released_metrics.py): the clean-accuracy estimate is unbiased
under RR and under RR-with-prior (where every clean label is in its top-k set), and is as documented
outside the top k; every estimate lies within its range, its interval covers at its rate, and the
console says when the release cannot tell a model from chance."""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd
import pytest

from labeldp.estimators import ReleasedLabels, clean_accuracy_estimate
from labeldp.evaluation import CHANCE_ADVICE, chance_warning, describe_test_metrics
from labeldp.mechanisms import (
    keep_probability,
    prior_top_k,
    randomized_response,
    randomized_response_likelihood,
    rr_with_prior,
    rr_with_prior_likelihood,
)
from labeldp.released_metrics import (
    LEVEL,
    accuracy_terms,
    channel_weights,
    clean_accuracy_terms,
    estimated_classification_metrics,
    points,
)


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


def _planted(rng, rows: int, base: float, classes: int = 2):
    """Scores and labels of a model whose positives (class 1 of two, else every class) follow its scores."""
    score = rng.normal(size=(rows, classes))
    logits = score + np.log(np.r_[1 - base, base] if classes == 2 else np.ones(classes))
    probabilities = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    labels = (rng.random(rows)[:, None] > probabilities.cumsum(axis=1)).sum(axis=1)
    return probabilities, labels


def _truth(probabilities, labels) -> dict[str, float]:
    from sklearn.metrics import roc_auc_score

    rows = np.arange(len(labels))
    truth = {
        "test_accuracy": np.mean(probabilities.argmax(axis=1) == labels),
        "test_log_loss": -np.mean(np.log(probabilities[rows, labels])),
    }
    if probabilities.shape[1] == 2:
        truth["test_auc"] = roc_auc_score(labels, probabilities[:, 1])
        truth["test_brier"] = np.mean((probabilities[:, 1] - labels) ** 2)
    return truth


@pytest.mark.parametrize(
    ("base", "classes", "epsilon", "identified"),
    [(0.01, 2, 1.0, False), (0.02, 2, 3.0, True), (0.3, 2, 0.5, True), (None, 4, 1.0, True)],
    ids=["rare-positives-eps1", "rare-positives-eps3", "balanced-eps0.5", "four-classes"],
)
def test_intervals_cover_the_metric_at_their_rate(base, classes, epsilon, identified) -> None:
    """Over 300 fresh samples of 3,000 rows and their RR releases, each metric's 95 % interval holds the
    metric of the rows' distribution (measured on 10^6 clean rows) at least at its rate (three standard
    errors of the count allow for chance), every estimate lies within its range, and the release tells
    the model from chance where it can (rare positives at epsilon 1: it mostly cannot, and says so)."""
    rng = np.random.default_rng(11)
    truth = _truth(*_planted(rng, 1_000_000, base, classes))
    draws, covered, beyond = 300, dict.fromkeys(truth, 0), 0
    for _ in range(draws):
        probabilities, labels = _planted(rng, 3_000, base, classes)
        noisy = randomized_response(labels, classes, epsilon, rng=rng)
        metrics = estimated_classification_metrics(
            probabilities, noisy, randomized_response_likelihood(noisy, classes, epsilon)
        )
        for name, value in truth.items():
            low, high = metrics[f"{name}_interval"]
            assert metrics[name] is None or low <= metrics[name] <= high
            assert 0 <= low <= high and (high <= 1 or name == "test_log_loss")
            covered[name] += low <= value <= high
        beyond += metrics["test_beyond_chance"]
    slack = 3 * math.sqrt(LEVEL * (1 - LEVEL) / draws)
    assert all(count / draws >= LEVEL - slack for count in covered.values()), covered
    assert (beyond / draws > 0.9) if identified else (beyond / draws < 0.5), beyond


def test_an_estimate_past_its_range_is_not_reported_and_keeps_the_interval_of_the_unbiased_one() -> None:
    """A model right on nearly every row, released at a small epsilon: the unbiased mean passes 1; the
    release cannot measure the accuracy (it would read 1 at the edge): none is reported, and the interval
    is the normal one cut at 1."""
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, 400)
    probabilities = np.eye(2)[labels] * 0.98 + 0.01
    for seed in range(50):
        noisy = randomized_response(labels, 2, 0.3, rng=seed)
        likelihood = randomized_response_likelihood(noisy, 2, 0.3)
        unbiased = accuracy_terms(probabilities, channel_weights(noisy, likelihood)).mean()
        if unbiased > 1:
            break
    metrics = estimated_classification_metrics(probabilities, noisy, likelihood)
    assert metrics["test_accuracy"] is None and metrics["test_accuracy_interval"][1] == 1.0
    low = unbiased - 1.959963984540054 * metrics["test_accuracy_se"]
    assert metrics["test_accuracy_interval"][0] == pytest.approx(low)


def test_the_console_says_when_the_release_cannot_tell_the_model_from_chance() -> None:
    """A summary whose AUC interval holds 1/2 prints the metrics with their intervals and the advice."""
    rng = np.random.default_rng(2)
    probabilities, labels = _planted(rng, 2_000, 0.01)
    noisy = randomized_response(labels, 2, 0.5, rng=rng)
    metrics = estimated_classification_metrics(probabilities, noisy, randomized_response_likelihood(noisy, 2, 0.5))
    summary = {**metrics, "test_labels": "estimated from their release"}
    text, warning = describe_test_metrics(summary), chance_warning(summary)
    assert not metrics["test_beyond_chance"] and "AUC" in text and "95% interval" in text
    assert "cannot tell this model from chance" in warning and CHANCE_ADVICE in warning


def test_a_release_that_estimates_no_positive_gives_no_auc_and_the_whole_range() -> None:
    """Four rows all released negative at epsilon 1: the positives' estimated weight is negative, so the
    AUC has no estimate and its interval is all of [0, 1]."""
    likelihood = randomized_response_likelihood(np.zeros(4, np.int64), 2, 1.0)
    probabilities = np.column_stack([1 - (p := np.array([0.48, 0.51, 0.47, 0.50])), p])
    metrics = estimated_classification_metrics(probabilities, np.zeros(4, np.int64), likelihood)
    assert metrics["test_auc"] is None and metrics["test_auc_interval"] == [0.0, 1.0]
    assert not metrics["test_beyond_chance"]


def _headline_run(tmp_path, frame: pd.DataFrame, *options: str) -> tuple[str, dict]:
    """A CSV run without a public test table: its console and summary."""
    import contextlib
    import io
    import json

    from labeldp.cli import main

    frame.to_csv(tmp_path / "t.csv", index=False)
    out = io.StringIO()
    argv = ["train", "--dataset", "csv", "--table", str(tmp_path / "t.csv"), "--label-column", "y", *options,
            "--epsilon", "1", "--epochs", "1", "--tune-budget", "0", "--quiet", "--threads", "1",
            "--insecure-noise-seed", "3", "--out", str(tmp_path / "run")]  # fmt: skip
    with contextlib.redirect_stdout(out):
        assert main(argv) == 0
    return out.getvalue(), json.loads((tmp_path / "run" / "summary.json").read_text())


def test_a_per_user_run_without_a_test_table_prints_no_auc_it_cannot_measure(tmp_path) -> None:
    """It printed `AUC 0.0000 (95% interval 0.0000 to 1.0000)` and stored 0.0: its model predicts the majority
    class, which the released test labels cannot tell from chance."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"user": np.arange(400) % 100, "x": rng.normal(size=400), "y": (rng.random(400) < 0.05)})
    console, summary = _headline_run(
        tmp_path, frame.astype({"y": int}), "--classes", "0", "1", "--privacy-unit", "user",
        "--max-rows-per-unit", "4", "--method", "lp-1st",
    )  # fmt: skip
    assert "AUC: the released test labels cannot measure it at this epsilon (95% interval" in console
    assert not re.search(r"AUC \d", console) and "--test-table" in console
    assert summary["test_auc"] is None and len(summary["test_auc_interval"]) == 2


def test_a_numeric_label_the_release_cannot_measure_prints_no_rmse(tmp_path) -> None:
    """The numeric guide's spend command printed `test RMSE 0.0000 (95% interval 0.0000 to 89.3001)`: an MSE
    estimate cut to its range's edge, reported as if it were measured."""
    rng = np.random.default_rng(1)
    spend = np.where(rng.random(600) < 0.05, rng.gamma(2.0, 60.0, 600), 0.0).round(2)
    frame = pd.DataFrame({"x": rng.normal(size=600), "y": spend})
    console, summary = _headline_run(tmp_path, frame, "--label-range", "0", "500", "--method", "rr-on-bins")
    assert "test RMSE: the released test labels cannot measure it at this epsilon" in console
    assert not re.search(r"RMSE \d", console)
    assert summary["test_rmse"] is None and summary["test_rmse_interval"][0] == 0.0


def test_a_lead_is_printed_within_the_range_of_a_difference_of_accuracies() -> None:
    """An unbiased paired difference on few held-out labels can pass 100 points; what is printed does not."""
    assert points(-1.2249, 0.8715) == "-100.00 +- 87.15 points"
    assert points(0.02, 0.01) == "+2.00 +- 1.00 points"
