"""The staged methods LP-1ST, LP-2ST and LP-MST (methods/stages.py): under a cluster prior the run
spends exactly epsilon and stage one trains on the posterior; consensus retraining spends nothing."""

from __future__ import annotations

import json

import numpy as np
import pytest

from labeldp.accounting import PrivacyLedger
from labeldp.boundary import unseal
from labeldp.mechanisms import keep_probability
from labeldp.runs import RunConfig, train_run
from labeldp.training import TrainConfig
from tests.helpers import config_of


def test_cluster_prior_run_spends_exactly_epsilon(blobs, tmp_path) -> None:
    config = RunConfig(
        dataset="csv",
        method="lp-2st",
        epsilon=0.5,
        prior="cluster",
        clusters=10,
        train=TrainConfig(epochs=3, batch_size=64),
        insecure_noise_seed=0,
    )  # a reproducible outcome
    summary = train_run(config, tmp_path / "run", progress=False, dataset=blobs)
    ledger = PrivacyLedger.load(tmp_path / "run" / "ledger.json")
    assert [e.tag for e in ledger.entries] == ["prior", "stage1", "stage2"]
    assert ledger.entries[0].num_members == 600
    assert summary["epsilon"] == pytest.approx(0.5, abs=1e-3)  # 0.05 histogram + 0.45 per label
    with np.load(tmp_path / "run" / "noisy_labels" / "stage1.npz") as stage1:
        assert stage1["k"].mean() < 10  # the cluster prior narrows RR to few labels
    # well-separated blobs: cluster priors make the stage-1 labels far more accurate than RR at 0.45
    with np.load(tmp_path / "run" / "noisy_labels" / "stage1.npz") as stage1:
        correct = np.mean(stage1["labels"] == unseal(blobs.y_train)[stage1["indices"]])
    assert correct > 2 * keep_probability(0.45, 10)


def test_stage_one_under_a_cluster_prior_trains_on_the_posterior(blobs, tmp_path, monkeypatch) -> None:
    import labeldp.runs.context as context

    soft_labels = []
    real_train_stage = context.train_stage

    def recording(*args, **kwargs):
        soft_labels.append(kwargs["soft_labels"])
        return real_train_stage(*args, **kwargs)

    monkeypatch.setattr(context, "train_stage", recording)
    for prior in ("cluster", None):
        config = RunConfig(
            dataset="csv",
            method="lp-2st",
            epsilon=0.5,
            prior=prior,
            clusters=10 if prior else 100,
            train=TrainConfig(epochs=1, batch_size=64),
        )
        train_run(config, tmp_path / f"run-{prior}", progress=False, dataset=blobs)
    assert soft_labels == [True, False, False, False]  # stage 1 under the prior only; later stages: forward loss


def test_consensus_retraining_trains_on_the_agreeing_releases_and_spends_nothing_more(blobs, tmp_path) -> None:
    config = RunConfig(
        dataset="csv",
        method="lp-1st",
        epsilon=1.0,
        options={"consensus": True},
        train=TrainConfig(epochs=3, batch_size=64),
        insecure_noise_seed=0,
    )
    summary = train_run(config, tmp_path / "run", progress=False, dataset=blobs)
    ledger = PrivacyLedger.load(tmp_path / "run" / "ledger.json")
    assert [e.tag for e in ledger.entries] == ["stage1"] and summary["epsilon"] == pytest.approx(1.0, abs=1e-3)
    # RR at epsilon 1 over 10 classes keeps about a quarter of the labels; the model agrees with those
    # and with few of the others
    kept = summary["consensus"]
    assert kept["released"] == 600 and 0.1 * 600 < kept["kept"] < 0.6 * 600
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [row["stage"] for row in rows] == [1, 1, 1, 2, 2, 2]  # the retrained model's epochs
    assert summary["test_accuracy"] > 0.5  # ten well-separated classes: chance is 0.1
    from labeldp.errors import ConfigError

    with pytest.raises(ConfigError, match="consensus"):
        RunConfig(dataset="csv", method="lp-1st", epsilon=1.0, options={"consensus": True, "loss": "mse"}).resolved()
    with pytest.raises(ConfigError, match="consensus"):  # not an option of DP-SGD
        RunConfig(dataset="digits", method="dp-sgd", epsilon=1.0, options={"consensus": True}).resolved()


def test_a_first_stage_by_vlp_releases_vectors_then_the_second_stage_trains_on_them_too(blobs, tmp_path) -> None:
    config = RunConfig(
        dataset="csv",
        method="lp-2st",
        epsilon=2.0,
        options={"first_release": "vlp"},
        train=TrainConfig(epochs=3, batch_size=64),
        insecure_noise_seed=0,
    )
    summary = train_run(config, tmp_path / "run", progress=False, dataset=blobs)
    ledger = PrivacyLedger.load(tmp_path / "run" / "ledger.json")
    assert [e.tag for e in ledger.entries] == ["stage1", "stage2"] and "vector" in ledger.entries[0].description
    assert summary["epsilon"] == pytest.approx(2.0, abs=1e-3) and summary["stages"][1]["reused"] == 240
    with np.load(tmp_path / "run" / "noisy_labels" / "stage1.npz") as stage1:
        assert "labels" not in stage1.files and stage1["evidence"].shape == (240, 10)


@pytest.mark.parametrize(
    "fields, num_classes, expected",
    [
        ({}, 10, "vlp"),  # 0.158 bits against RR's 0.106
        ({"epsilon": 2.0}, 10, "rr"),  # 0.587 against 0.588
        ({"epsilon": 4.0}, 100, "vlp"),
        ({}, 4, "rr"),  # at 2 to 4 classes RR's label tells more at every epsilon
        ({"method": "lp-mst"}, 10, "vlp"),
        ({"loss": "ce"}, 10, "rr"),
        ({"prior": "histogram"}, 10, "rr"),
        ({"consensus": True}, 10, "rr"),
        ({"first_release": "rr"}, 10, "rr"),
        ({"first_release": "vlp", "epsilon": 8.0}, 10, "vlp"),
        ({"method": "lp-1st"}, 10, "rr"),  # not an option of lp-1st, whose release is RR
        ({"label_range": (0.0, 9.0), "label_grid": 10}, 10, "rr"),  # a numeric label's grid
    ],
)
def test_the_automatic_first_release_takes_vectors_where_one_tells_more_and_the_run_trains_on_them(
    fields, num_classes, expected
) -> None:
    from labeldp.methods.stages import first_release_of

    config = config_of(dataset="csv", **{"method": "lp-2st", "epsilon": 1.0, **fields}).resolved()
    assert first_release_of(config, num_classes) == expected


@pytest.mark.parametrize(
    "fields",
    [
        {"options": {"first_release": "vlp", "loss": "ce"}},
        {"prior": "cluster"},
        {"options": {"first_release": "vlp", "consensus": True}},
    ],
)
def test_a_first_stage_by_vlp_refuses_what_needs_labels_before_anything_is_written(fields, tmp_path) -> None:
    from labeldp.errors import ConfigError

    config = RunConfig(**{"method": "lp-2st", "epsilon": 1.0, "options": {"first_release": "vlp"}, **fields})
    with pytest.raises(ConfigError, match="--first-release vlp releases vectors"):
        train_run(config, tmp_path / "run", progress=False)
    assert not (tmp_path / "run").exists()
