"""PATE: vote aggregators against their exact distributions, their privacy, the ledger, and runs."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats
from scipy.optimize import brentq

from labeldp.accounting import PrivacyLedger, calibrate_vote_noise, max_queries, pate_epsilon, pate_event
from labeldp.boundary import release_pate_labels
from labeldp.config.pate import PATEConfig
from labeldp.mechanisms import answer_probability, confident_gnmax, gnmax, gnmax_probabilities, teacher_votes
from labeldp.randomness import SecureGenerator
from labeldp.runs import RunConfig, train_run
from labeldp.teachers import partition_teachers, select_queries, train_teachers
from labeldp.training import TrainConfig

VOTES = np.array([[10, 8, 0, 3], [5, 5, 5, 5], [0, 1, 2, 18], [7, 0, 6, 8]])


def _chi_square_pvalue(samples: np.ndarray, probs: np.ndarray) -> float:
    counts = np.bincount(samples, minlength=probs.size)
    keep = probs * samples.size > 5
    expected = probs[keep] * samples.size
    observed = counts[keep]
    expected *= observed.sum() / expected.sum()
    return stats.chisquare(observed, expected).pvalue


def test_teacher_votes_counts_each_teachers_vote():
    predictions = np.random.default_rng(0).integers(0, 5, size=(30, 7))
    votes = teacher_votes(predictions, 5)
    assert votes.shape == (7, 5) and np.all(votes.sum(axis=1) == 30)
    for q in range(7):
        assert np.array_equal(votes[q], np.bincount(predictions[:, q], minlength=5))


def test_exact_probabilities_match_a_direct_integration():
    from scipy import integrate

    sigma, row = 4.0, VOTES[0].astype(float)
    for j in range(4):

        def integrand(x, j=j):
            others = np.delete(row, j)
            return stats.norm.pdf(x, row[j], sigma) * np.prod(stats.norm.cdf(x, others, sigma))

        expected = integrate.quad(integrand, -60, 80, limit=200)[0]
        assert gnmax_probabilities(VOTES[:1], sigma)[0, j] == pytest.approx(expected, abs=1e-8)


@pytest.mark.parametrize("rng", [0, "secure"])
def test_gnmax_follows_its_exact_distribution(rng):
    sigma, repeats = 4.0, 4000
    gen = SecureGenerator() if rng == "secure" else np.random.default_rng(rng)
    answers = np.stack([gnmax(VOTES, sigma, gen) for _ in range(repeats)])
    exact = gnmax_probabilities(VOTES, sigma)
    for q in range(len(VOTES)):
        assert _chi_square_pvalue(answers[:, q], exact[q]) > 1e-4


def test_distribution_test_has_power():
    """The chi-square test above rejects GNMax run with 20% less noise than claimed."""
    answers = np.stack([gnmax(VOTES, 0.8 * 4.0, np.random.default_rng(s)) for s in range(4000)])
    exact = gnmax_probabilities(VOTES, 4.0)
    assert min(_chi_square_pvalue(answers[:, q], exact[q]) for q in (0, 3)) < 1e-4


def test_confident_gnmax_answers_with_the_exact_probability():
    threshold, sigma1, repeats = 9.0, 3.0, 4000
    gen = np.random.default_rng(5)
    runs = [confident_gnmax(VOTES, threshold, sigma1, 4.0, gen) for _ in range(repeats)]
    answered = np.stack([a for a, _ in runs])
    labels = np.stack([lab for _, lab in runs])
    assert np.all((labels == -1) == ~answered)
    for q, p in enumerate(answer_probability(VOTES, threshold, sigma1)):
        assert stats.binomtest(int(answered[:, q].sum()), repeats, p).pvalue > 1e-4


def _hockey_stick(p: np.ndarray, q: np.ndarray, epsilon: float) -> float:
    return float(np.maximum(p - math.exp(epsilon) * q, 0.0).sum())


@pytest.mark.parametrize("sigma", [2.0, 5.0])
def test_one_query_is_within_its_recorded_epsilon_and_delta(sigma):
    """Moving one teacher's vote (what replacing one label can do) changes GNMax's exact output
    distribution by no more than the event's (epsilon, delta), in both directions."""
    delta = 1e-3
    epsilon = pate_epsilon(1, sigma, delta)
    row = np.array([[6, 5, 1, 0]])
    for a in range(4):
        for b in range(4):
            if a == b or row[0, a] == 0:
                continue
            moved = row.copy()
            moved[0, a] -= 1
            moved[0, b] += 1
            p, q = gnmax_probabilities(row, sigma)[0], gnmax_probabilities(moved, sigma)[0]
            assert _hockey_stick(p, q, epsilon) <= delta + 1e-9
            assert _hockey_stick(q, p, epsilon) <= delta + 1e-9


def test_confident_query_is_within_its_recorded_epsilon_and_delta():
    sigma, sigma1, threshold, delta = 3.0, 4.0, 6.0, 1e-3
    epsilon = pate_epsilon(1, sigma, delta, sigma1)
    row, moved = np.array([[6, 5, 1]]), np.array([[5, 6, 1]])

    def outputs(votes):  # (not answered, answer 0, answer 1, answer 2)
        p = answer_probability(votes, threshold, sigma1)[0]
        return np.concatenate([[1 - p], p * gnmax_probabilities(votes, sigma)[0]])

    for first, second in ((row, np.array([[6, 4, 2]])), (row, moved), (np.array([[7, 0, 0]]), np.array([[6, 1, 0]]))):
        p, q = outputs(first), outputs(second)
        assert _hockey_stick(p, q, epsilon) <= delta + 1e-9
        assert _hockey_stick(q, p, epsilon) <= delta + 1e-9


def _analytic_gaussian_epsilon(mu: float, delta: float) -> float:
    """Epsilon of a Gaussian mechanism with sensitivity/noise ratio mu (Balle & Wang 2018, Thm 8)."""

    def excess(eps):
        return stats.norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2) - delta

    return brentq(excess, 0.0, 100.0)


@pytest.mark.parametrize("queries,sigma,sigma1", [(1, 20.0, None), (150, 60.0, None), (400, 80.0, 160.0)])
def test_ledger_epsilon_equals_the_closed_form(queries, sigma, sigma1):
    """Q answers (L2 sensitivity sqrt 2) and Q threshold checks (sensitivity 1) compose into one
    Gaussian with mu^2 = Q (2 / sigma^2 + 1 / sigma1^2); its epsilon has a closed form."""
    ledger = PrivacyLedger(100)
    ledger.record(pate_event(queries, sigma, sigma1), np.arange(100), "pate")
    mu = math.sqrt(queries * (2 / sigma**2 + (0 if sigma1 is None else 1 / sigma1**2)))
    for delta in (1e-5, 1e-3):
        exact = _analytic_gaussian_epsilon(mu, delta)
        assert exact <= ledger.epsilon(delta) <= exact + 1e-3
        assert pate_epsilon(queries, sigma, delta, sigma1) == pytest.approx(ledger.epsilon(delta), abs=1e-6)


@pytest.mark.parametrize("ratio", [None, 2.0])
def test_calibration_meets_the_target_and_is_within_one_percent(ratio):
    epsilon, delta, queries = 1.0, 1e-5, 120
    sigma = calibrate_vote_noise(epsilon, delta, queries, ratio)
    threshold = None if ratio is None else ratio * sigma
    assert pate_epsilon(queries, sigma, delta, threshold) <= epsilon
    smaller = 0.99 * sigma
    assert pate_epsilon(queries, smaller, delta, None if ratio is None else ratio * smaller) > epsilon
    most = max_queries(epsilon, delta, sigma, ratio)
    assert most >= queries
    assert pate_epsilon(most + 1, sigma, delta, threshold) > epsilon


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


def test_partition_is_disjoint_and_balanced_and_queries_are_fixed():
    teacher_of = partition_teachers(1003, 10, seed=3)
    sizes = np.bincount(teacher_of, minlength=10)
    assert sizes.sum() == 1003 and sizes.max() - sizes.min() <= 1
    assert np.array_equal(select_queries(1003, 50, 3), select_queries(1003, 50, 3))
    assert np.unique(select_queries(1003, 50, 3)).size == 50


def test_plan_fills_in_queries_or_noise_within_the_budget():
    config = PATEConfig(teachers=100)
    queries, sigma = config.plan(1.0, 1e-5, 10_000)
    assert sigma == 25.0 and pate_epsilon(queries, sigma, 1e-5) <= 1.0 < pate_epsilon(queries + 1, sigma, 1e-5)
    queries, sigma = PATEConfig(teachers=100, queries=50).plan(1.0, 1e-5, 10_000)
    assert queries == 50 and pate_epsilon(50, sigma, 1e-5) <= 1.0
    with pytest.raises(ValueError, match="cost epsilon"):
        PATEConfig(teachers=100, queries=5000, noise_std=10.0).plan(1.0, 1e-5, 10_000)
    with pytest.raises(ValueError, match="does not pay for one query"):
        PATEConfig(teachers=4).plan(0.01, 1e-5, 10_000)


def _small_teacher_problem():
    gen = np.random.default_rng(0)
    x = gen.normal(size=(120, 6)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64)
    return x, y, partition_teachers(120, 4, seed=0)


def test_teachers_resume_after_a_crash(tmp_path):
    import torch

    from labeldp.models import build_model

    x, y, teacher_of = _small_teacher_problem()
    config = TrainConfig(epochs=3, batch_size=16)

    def build(t):
        return build_model("mlp", (6,), 2, seed=t)  # each teacher's initialisation from a seed of its own

    full = train_teachers(build, x, y, teacher_of, x[:20], 2, config, seed=1, progress=False)
    checkpoint = tmp_path / "teachers.npz"
    calls = []

    def crash_after_two(t):
        if len(calls) == 2:
            raise KeyboardInterrupt
        calls.append(t)
        return build(t)

    with pytest.raises(KeyboardInterrupt):
        train_teachers(
            crash_after_two, x, y, teacher_of, x[:20], 2, config, seed=1, checkpoint=checkpoint, progress=False
        )
    calls.clear()
    torch.randn(5)  # move the global generator: the teachers must not depend on its state
    resumed = train_teachers(
        lambda t: calls.append(t) or build(t),
        x,
        y,
        teacher_of,
        x[:20],
        2,
        config,
        seed=1,
        checkpoint=checkpoint,
        progress=False,
    )
    assert calls == [2, 3]
    assert np.array_equal(resumed, full)


@pytest.mark.parametrize("aggregator", ["gnmax", "confident"])
def test_pate_run_on_digits_records_what_it_released(tmp_path, aggregator):
    pate = PATEConfig(teachers=10, queries=300, aggregator=aggregator, threshold=0.5, teacher_epochs=5)
    config = RunConfig(dataset="digits", method="pate", epsilon=8.0, pate=pate, train=TrainConfig(epochs=3))
    summary = train_run(config, tmp_path / "run", progress=False)
    assert summary["epsilon"] <= 8.0 and summary["delta"] == 1e-5 and summary["queries"] == 300
    released = np.load(tmp_path / "run" / "noisy_labels" / "pate.npz")
    assert released["queries"].size == 300 and summary["answered"] == int(released["answered"].sum())
    assert not (tmp_path / "run" / "checkpoints" / "teachers.npz").exists()
    # the ledger's epsilon, recomputed independently from the recorded queries and noise
    sigma = float(released["noise_std"])
    sigma1 = 2.0 * sigma if aggregator == "confident" else math.inf
    mu = math.sqrt(300 * (2 / sigma**2 + 1 / sigma1**2))
    ledger = json.loads((tmp_path / "run" / "ledger.json").read_text())
    assert ledger["epsilon"] == pytest.approx(_analytic_gaussian_epsilon(mu, 1e-5), abs=1e-3)
    assert ledger["epsilon"] == pytest.approx(summary["epsilon"], abs=1e-6)
    assert train_run(config, tmp_path / "run", progress=False) == summary  # finished: nothing redrawn


def test_pate_run_refuses_bad_settings_before_writing_anything(tmp_path):
    with pytest.raises(ValueError, match="cannot exceed"):
        train_run(
            RunConfig(dataset="digits", method="pate", epsilon=1.0, pate=PATEConfig(queries=5000)),
            tmp_path / "a",
            progress=False,
        )
    assert not (tmp_path / "a").exists()
    with pytest.raises(ValueError, match="does not use prior"):
        RunConfig(dataset="digits", method="pate", epsilon=1.0, prior="cluster").resolved()


def test_secure_generator_draws_normals():
    draws = SecureGenerator().normal(1.0, 3.0, size=20001)
    assert draws.shape == (20001,)
    assert stats.kstest(draws, stats.norm(1.0, 3.0).cdf).pvalue > 1e-4
    assert stats.kstest(draws, stats.norm(1.0, 2.7).cdf).pvalue < 1e-4  # the test sees a 10% smaller std
