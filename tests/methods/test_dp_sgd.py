"""The DP-SGD method (methods/dp_sgd.py) end to end: a run records its event before training, and its
configuration errors come before any spend."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

from labeldp.accounting import DPSGD_RELATION, PrivacyLedger, dpsgd_epsilon
from labeldp.config.dpsgd import DPSGDConfig
from labeldp.dpsgd.trainer import train_dpsgd
from labeldp.errors import BudgetError
from labeldp.runs import RunConfig, train_run
from labeldp.training import TrainConfig


def test_dpsgd_run_records_its_event_before_training(tmp_path):
    torch.set_default_dtype(torch.float32)
    config = RunConfig(
        dataset="digits",
        method="dp-sgd",
        epsilon=2.0,
        model="mlp",
        train=TrainConfig(epochs=2, batch_size=64, lr=0.5, weight_decay=0.0),
    )
    summary = train_run(config, tmp_path / "run", progress=False)
    assert summary["epsilon"] == pytest.approx(2.0, abs=0.01) and summary["epsilon"] <= 2.0
    assert summary["delta"] == 1e-5 and summary["neighboring_relation"] == "add-or-remove one example"
    assert summary["test_accuracy"] > 0.3
    ledger = PrivacyLedger.load(tmp_path / "run" / "ledger.json")
    assert ledger.neighboring_relation == DPSGD_RELATION and [e.tag for e in ledger.entries] == ["dp-sgd"]
    assert ledger.epsilon(1e-5) == pytest.approx(
        dpsgd_epsilon(summary["noise_multiplier"], summary["sampling_probability"], summary["steps"], 1e-5)
    )


def test_dpsgd_config_errors_before_any_spend(tmp_path):
    with pytest.raises(ValueError, match="delta applies only"):
        RunConfig(method="lp-1st", epsilon=1.0, delta=1e-5).resolved()
    with pytest.raises(ValueError, match="mixup"):
        RunConfig(method="dp-sgd", epsilon=1.0, train=TrainConfig(mixup_alpha=1.0)).resolved()
    with pytest.raises(ValueError, match="amp"):
        RunConfig(method="dp-sgd", epsilon=1.0, train=TrainConfig(amp=True)).resolved()
    with pytest.raises(ValueError, match="amp"):
        train_dpsgd(
            nn.Linear(4, 2),
            np.zeros((8, 4), np.float32),
            np.zeros(8, np.int64),
            TrainConfig(batch_size=4, amp=True),
            DPSGDConfig(),
            1.0,
            progress=False,
        )
    with pytest.raises(ValueError, match="max_grad_norm"):
        RunConfig(method="dp-sgd", epsilon=1.0, options=DPSGDConfig(max_grad_norm=0)).resolved()
    with pytest.raises(ValueError, match="augmult"):
        RunConfig(
            method="dp-sgd", epsilon=1.0, train=TrainConfig(augment=False), options=DPSGDConfig(augmult=2)
        ).resolved()
    with pytest.raises(ValueError, match="batch_size"):
        train_run(
            RunConfig(method="dp-sgd", epsilon=1.0, train=TrainConfig(batch_size=5000)), tmp_path / "r", progress=False
        )
    with pytest.raises(ValueError, match="no augmentation"):  # the digits have none
        train_run(
            RunConfig(method="dp-sgd", epsilon=1.0, options=DPSGDConfig(augmult=2)), tmp_path / "a", progress=False
        )
    with pytest.raises(ValueError, match="augmult"):
        train_dpsgd(
            nn.Linear(4, 2),
            np.zeros((8, 4), np.float32),
            np.zeros(8, np.int64),
            TrainConfig(batch_size=4),
            DPSGDConfig(augmult=2),
            1.0,
            augmentation="none",
            progress=False,
        )
    given = RunConfig(
        method="dp-sgd",
        epsilon=1.0,
        model="mlp",
        train=TrainConfig(epochs=1, batch_size=64),
        options=DPSGDConfig(noise_multiplier=0.8),
    )
    with pytest.raises(BudgetError, match="more than the budget"):  # sigma 0.8 spends epsilon ~3.3 here
        train_run(given, tmp_path / "s", progress=False)
    # nothing was written: the same folder takes the corrected run
    assert not any((tmp_path / name).exists() for name in ("r", "a", "s"))
    torch.set_default_dtype(torch.float32)  # as the CLI trains
    summary = train_run(dataclasses.replace(given, epsilon=5.0), tmp_path / "s", progress=False)
    assert 2 < summary["epsilon"] <= 5


def test_dp_sgd_on_a_table_without_a_test_file_reads_no_private_test_label(tmp_path) -> None:
    """The held-out rows of a table's private label column are not measured by DP-SGD (it releases no
    label): the run finishes and says so, where it used to stop after its spend, reading them."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 3))
    frame = pd.DataFrame(x, columns=["a", "b", "c"]).assign(y=(x[:, 0] > 0).astype(int))
    frame.to_csv(tmp_path / "t.csv", index=False)
    config = RunConfig(
        dataset="csv",
        table=str(tmp_path / "t.csv"),
        label_column="y",
        classes=("0", "1"),
        method="dp-sgd",
        epsilon=4.0,
        train=TrainConfig(epochs=1, batch_size=32),
        options=DPSGDConfig(noise_multiplier=2.0),  # epsilon 0.98 here: no calibration (seconds) to wait for
    )
    summary = train_run(config, tmp_path / "run", progress=False)
    assert "test_accuracy" not in summary
    assert "not measured" in summary["test_labels"]
