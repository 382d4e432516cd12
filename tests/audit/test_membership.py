"""Membership audits (audit/membership.py): the bound is sound for scores without signal and
detects a separation, an overfit model is caught, and the default number of targets fits a small
dataset."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from labeldp.audit import attack_metrics, membership_audit, membership_epsilon_lower_bound
from labeldp.runs import RunConfig
from labeldp.training import TrainConfig


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
