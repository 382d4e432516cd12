"""Audits: sound on RR, tight with many canaries, catch a broken mechanism, work on a whole run."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

from labeldp.accounting import PrivacyLedger
from labeldp.audit import (
    attack_metrics,
    audit_config,
    audit_guesses,
    audit_mechanism,
    clopper_pearson_lower,
    epsilon_from_precision,
    epsilon_lower_bound,
    guess_canary_labels,
    membership_audit,
    membership_epsilon_lower_bound,
)
from labeldp.cli import main
from labeldp.mechanisms import keep_probability, randomized_response
from labeldp.runs import RunConfig
from labeldp.training import TrainConfig


def rr(epsilon: float, seed: int):
    return lambda labels: randomized_response(labels, 10, epsilon, rng=seed)


def test_bound_formulas() -> None:
    assert epsilon_from_precision(keep_probability(1.5, 10), 10) == pytest.approx(1.5)
    assert epsilon_from_precision(0.05, 10) == 0.0 and epsilon_from_precision(1.0, 10) == math.inf
    assert clopper_pearson_lower(0, 10, 0.05) == 0.0
    assert clopper_pearson_lower(10, 10, 0.05) == pytest.approx(0.05 ** (1 / 10))
    assert epsilon_lower_bound(0, 0, 10) == 0.0
    # more thresholds tried -> a weaker (smaller) bound for the same counts
    assert epsilon_lower_bound(90, 100, 10, num_tests=7) < epsilon_lower_bound(90, 100, 10, num_tests=1)


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


def test_audit_command_leaves_the_run_alone_and_shows_what_it_spent(tmp_path, capsys) -> None:
    """The audit re-releases the real labels: its spend is recorded on the run's examples and the total
    over the run folder is shown; its noise is not the run's (even when the run's noise is seeded)."""
    run = tmp_path / "run"
    assert (
        main(
            [
                "train",
                "--method",
                "lp-1st",
                "--epsilon",
                "2",
                "--epochs",
                "3",
                "--out",
                str(run),
                "--quiet",
                "--insecure-noise-seed",
                "3",
            ]
        )
        == 0
    )
    ledger = (run / "ledger.json").read_bytes()
    labels = (run / "noisy_labels" / "stage1.npz").read_bytes()
    assert main(["audit", str(run), "--canaries", "100"]) == 0
    printed = capsys.readouterr().out
    assert "epsilon lower bound" in printed
    folder = run / "audit" / "mislabeled-canaries100-seed0"  # one folder per audit setting
    assert (folder / "audit.json").exists()
    assert (run / "ledger.json").read_bytes() == ledger and (run / "noisy_labels" / "stage1.npz").read_bytes() == labels
    spent = PrivacyLedger.load(folder / "audit_ledger.json")
    assert spent.epsilon() == pytest.approx(2.0, abs=1e-3) and spent.entries[0].num_members == 1347
    assert f"Everything in {run} together is epsilon 4" in printed and f"Delete {run / 'audit'}" in printed
    report = json.loads((folder / "audit.json").read_text())
    assert report["spent"]["run_and_audit_epsilon"] == pytest.approx(4.0, abs=1e-3)
    with (
        np.load(run / "noisy_labels" / "stage1.npz") as original,
        np.load(folder / "canary_run" / "noisy_labels" / "stage1.npz") as audit,
    ):
        assert np.mean(original["labels"] == audit["labels"]) < 0.9  # fresh noise: not the run's flips
    # a second audit with other canaries trains its own canary run, and the folder's total grows
    assert main(["audit", str(run), "--canaries", "100", "--seed", "1"]) == 0
    assert (run / "audit" / "mislabeled-canaries100-seed1" / "canary_run" / "model.pt").exists()
    assert f"Everything in {run} together is epsilon 6" in capsys.readouterr().out
    assert main(["audit", str(tmp_path / "nothing")]) == 2
    capsys.readouterr()
    assert main(["audit", str(run), "--targets", "50", "--shadows", "2"]) == 2  # options of --membership alone
    assert "--shadows, --targets apply only with --membership" in capsys.readouterr().err


def test_membership_bound_is_sound_for_random_scores_and_detects_separation() -> None:
    rng = np.random.default_rng(0)
    is_member = rng.random(4000) < 0.5
    assert membership_epsilon_lower_bound(rng.random(4000), is_member) < 0.2  # no signal: near zero
    separated = np.where(is_member, 1.0, 0.0) + 0.01 * rng.random(4000)
    assert membership_epsilon_lower_bound(separated, is_member) > 3.0
    metrics = attack_metrics(separated, is_member)
    assert metrics["auc"] == 1.0 and metrics["tpr_at_fpr"]["0.01"] == 1.0


def test_membership_audit_of_an_overfit_model(blobs, tmp_path) -> None:
    train = TrainConfig(epochs=25, batch_size=32, lr=0.05, weight_decay=0.0, augment=False)
    noisy_blobs = dataclasses.replace(
        blobs, x_train=blobs.x_train + np.random.default_rng(1).normal(0, 8, blobs.x_train.shape).astype(np.float32)
    )
    report = membership_audit(
        RunConfig(dataset="csv", method="non-private", train=train),
        tmp_path / "mia",
        num_targets=200,
        num_shadows=2,
        dataset=noisy_blobs,
    )
    assert report["loss_threshold"]["auc"] > 0.7 and report["lira_offline"]["auc"] > 0.7
    assert (tmp_path / "mia" / "membership.json").exists()


def test_membership_defaults_fit_a_small_dataset() -> None:
    from labeldp.audit.membership import check_membership_options, default_targets

    assert default_targets(1347) == 672 and default_targets(60000) == 1000
    check_membership_options(1347, None, 4)  # the embedded digits: the default targets fit
    with pytest.raises(ValueError, match="--targets"):
        check_membership_options(1347, 1000, 4)
