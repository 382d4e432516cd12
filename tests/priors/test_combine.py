"""Combining priors (priors/combine.py): tempering flattens a prior and widens RR-with-prior, and
combined priors spend the same budget."""

from __future__ import annotations

import numpy as np

from labeldp.accounting import PrivacyLedger
from labeldp.priors import temper
from labeldp.runs import RunConfig, train_run
from labeldp.training import TrainConfig


def test_combined_priors_spend_the_same_budget(blobs, tmp_path) -> None:
    config = RunConfig(
        dataset="csv",
        method="lp-2st",
        epsilon=0.5,
        prior="cluster",
        clusters=10,
        options={"combine_priors": True},
        train=TrainConfig(epochs=2, batch_size=64),
    )
    summary = train_run(config, tmp_path / "run", progress=False, dataset=blobs)
    # the histogram's 0.05 plus, where some example's k >= 2, the labels' 0.45: with clusters this pure
    # every k can be 1 (the release then says nothing), so the total lies between the two, never above
    ledger = PrivacyLedger.load(tmp_path / "run" / "ledger.json")
    assert [entry.tag for entry in ledger.entries] == ["prior", "stage1", "stage2"]
    assert 0.05 - 1e-3 <= summary["epsilon"] <= 0.5 + 1e-3
    with np.load(tmp_path / "run" / "noisy_labels" / "stage2.npz") as stage2:
        channel = stage2["likelihood"] / stage2["likelihood"].sum(axis=1, keepdims=True)
        # the cluster prior is folded into stage 2's targets, so they are sharper than its channel
        assert np.mean(stage2["evidence"].max(axis=1)) > np.mean(channel.max(axis=1)) + 0.05


def test_tempering_flattens_the_prior_and_widens_rr_with_prior(blobs, tmp_path) -> None:
    rows = np.array([[0.8, 0.15, 0.05, 0.0], [0.25, 0.25, 0.25, 0.25]])
    assert temper(rows, 1.0) is rows
    flat = temper(rows, 3.0)
    assert np.allclose(flat.sum(axis=1), 1.0) and np.allclose(flat[1], 0.25)
    assert flat[0, 0] < 0.8 and flat[0, 3] == 0.0 and np.all(np.diff(flat[0]) <= 0)
    assert np.allclose(temper(rows, 0.5)[0], rows[0] ** 2 / (rows[0] ** 2).sum())
    mean_k = {}
    for temperature in (1.0, 4.0):
        config = RunConfig(
            dataset="csv",
            method="lp-1st",
            epsilon=1.0,
            prior="cluster",
            clusters=10,
            prior_temperature=temperature,
            insecure_noise_seed=0,  # one histogram draw for both: only the temperature differs
            train=TrainConfig(epochs=1, batch_size=64),
        )
        summary = train_run(config, tmp_path / f"t{temperature}", progress=False, dataset=blobs)
        mean_k[temperature] = summary["stages"][0]["mean_k"]
    assert mean_k[4.0] > mean_k[1.0]
