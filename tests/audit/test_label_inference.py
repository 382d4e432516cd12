"""Label-inference audits (audit/label_inference.py): sound on RR over repeated trials, tight with
many canaries, able to catch a mechanism that claims too small an epsilon, the attacker's
abstention and calibration, and audits of whole runs (private against non-private, DP-SGD against
its label guarantee)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from labeldp.audit import audit_config, audit_guesses, audit_mechanism, audit_run, guess_canary_labels
from labeldp.errors import RunDirectoryError
from labeldp.mechanisms import randomized_response
from labeldp.runs import RunConfig, RunDirectory
from labeldp.training import TrainConfig


def rr(epsilon: float, seed: int):
    return lambda labels: randomized_response(labels, 10, epsilon, rng=seed)


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 2.0, 4.0])
def test_audit_of_rr_is_sound_over_repeated_trials(epsilon: float) -> None:
    # At 95 % confidence a bound may exceed the truth in at most ~5 % of trials, since RR meets
    # its bound exactly; over 100 trials more than 12 would mean the estimator is not sound.
    bounds = [audit_mechanism(rr(epsilon, 1000 + t), 10, 5000, rng=t).epsilon_lower_bound for t in range(100)]
    assert sum(b > epsilon for b in bounds) <= 12
    # At 99.9 % confidence no trial exceeds it.
    strict = [
        audit_mechanism(rr(epsilon, 2000 + t), 10, 5000, confidence=0.999, rng=t).epsilon_lower_bound for t in range(30)
    ]
    assert max(strict) <= epsilon


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 2.0, 4.0])
def test_audit_of_rr_is_within_a_factor_two_with_1e5_canaries(epsilon: float) -> None:
    bound = audit_mechanism(rr(epsilon, 0), 10, 100_000, rng=1).epsilon_lower_bound
    assert bound >= epsilon / 2  # tightness; soundness is the repeated-trials test above
    assert bound <= epsilon * 1.05


def test_broken_mechanism_is_caught() -> None:
    """Claims epsilon 1 but keeps the label as often as epsilon 1.6 would."""
    claimed = 1.0
    bound = audit_mechanism(rr(1.6, 0), 10, 100_000, rng=1).epsilon_lower_bound
    assert bound > claimed


def test_abstention_finds_the_confident_leaks() -> None:
    rng = np.random.default_rng(0)
    secrets = rng.integers(0, 9, 1000)
    guesses = rng.integers(0, 9, 1000)
    scores = rng.random(1000)
    guesses[:100], scores[:100] = secrets[:100], 2.0  # 10 % leak perfectly, with high confidence
    result = audit_guesses(guesses, secrets, scores, num_options=9)
    best = max(result.thresholds, key=lambda t: t.epsilon_lower_bound)
    assert best.answer_fraction in (0.05, 0.1) and best.precision == 1.0
    assert result.epsilon_lower_bound > 3.0
    assert result.thresholds[-1].epsilon_lower_bound < 1.0  # answering everything hides the leak


def test_attacker_rules_out_the_given_label_and_calibrates() -> None:
    probs = np.full((2, 3), 0.1)
    probs[0] = [0.8, 0.15, 0.05]
    guesses, scores = guess_canary_labels(probs, np.array([0, 1]))
    calibrated, _ = guess_canary_labels(
        probs, np.array([0, 1]), reference_probabilities=np.array([[0.1, 0.8, 0.1]] * 2)
    )
    assert guesses[0] == 1 and scores[0] == pytest.approx(np.log(0.15))
    assert guess_canary_labels(probs)[0][0] == 0  # without original labels every class is a candidate
    assert calibrated[0] == 2  # 0.05 / 0.1 beats 0.15 / 0.8


@pytest.mark.parametrize("canaries, options", [("noise", 10), ("mislabeled", 9)])
def test_model_level_audit_separates_private_from_non_private(blobs, tmp_path, canaries, options) -> None:
    train = TrainConfig(epochs=30, batch_size=32, lr=0.05, weight_decay=0.0, augment=False)
    leaky = audit_config(
        RunConfig(dataset="csv", method="non-private", train=train),
        tmp_path / "np",
        num_canaries=150,
        dataset=blobs,
        canaries=canaries,
    )
    private = audit_config(
        RunConfig(dataset="csv", method="lp-1st", epsilon=0.5, train=train, insecure_noise_seed=0),
        tmp_path / "e05",
        num_canaries=150,
        dataset=blobs,
        canaries=canaries,
    )
    assert leaky["epsilon_lower_bound"] > 2.0
    assert private["epsilon_lower_bound"] <= 0.5
    saved = json.loads((tmp_path / "np" / "audit.json").read_text())
    assert saved["epsilon_lower_bound"] == leaky["epsilon_lower_bound"] and saved["num_options"] == options
    assert (tmp_path / "np" / "reference_run" / "model.pt").exists()  # trained without canaries
    # the canary and reference runs each released the 600 examples' labels at epsilon 0.5 once more
    assert private["spent"]["audit_epsilon"] == pytest.approx(1.0, abs=1e-3)
    with pytest.raises(ValueError, match="canaries must be one of"):
        audit_config(
            RunConfig(dataset="csv", method="non-private", train=train),
            tmp_path / "x",
            dataset=blobs,
            canaries="poison",
        )


def test_dpsgd_runs_are_audited_against_their_label_guarantee(blobs, tmp_path) -> None:
    train = TrainConfig(epochs=5, batch_size=64, lr=0.5, weight_decay=0.0, augment=False)
    report = audit_config(
        RunConfig(dataset="csv", method="dp-sgd", epsilon=1.0, train=train),
        tmp_path / "dp",
        num_canaries=100,
        dataset=blobs,
    )
    assert report["claimed_epsilon"] == pytest.approx(1.0, abs=0.01)
    assert report["claimed_label_epsilon"] == pytest.approx(2 * report["claimed_epsilon"])
    assert report["epsilon_lower_bound"] <= report["claimed_label_epsilon"]


def test_a_run_without_its_data_facts_needs_the_number_of_canaries(tmp_path) -> None:
    """The default canaries are sized on the run's training set, which its data.json records."""
    RunDirectory(tmp_path).write_config(RunConfig(dataset="digits", method="lp-1st", epsilon=2.0).to_dict())
    with pytest.raises(RunDirectoryError, match="give num_canaries"):
        audit_run(tmp_path)
