"""The VLP method (methods/vlp.py) end to end: a run on the digits spends exactly its epsilon, saves the
vectors and no label, and learns; an interrupted run resumes without a second draw; private test labels
are released by RR and the metrics estimated; ``labeldp tune`` scores candidates on the vectors; VLP
refuses a loss it does not use before anything is written."""

from __future__ import annotations

import json

import numpy as np
import pytest

from labeldp.accounting import PrivacyLedger
from labeldp.boundary import PrivateLabels
from labeldp.data import LabeledDataset
from labeldp.experiments.release_tuning import tune
from labeldp.methods import vlp as vlp_method
from labeldp.runs import RunConfig, train_run
from labeldp.runs.context import RunContext
from labeldp.training import TrainConfig

pytestmark = pytest.mark.filterwarnings("ignore::labeldp.errors.InsecureNoiseWarning")


def _config(**fields) -> RunConfig:
    train = TrainConfig(epochs=20, batch_size=32, lr=0.02, weight_decay=1e-3)
    return RunConfig(
        **{"dataset": "digits", "method": "vlp", "epsilon": 4.0, "insecure_noise_seed": 1, "train": train, **fields}
    )


def test_vlp_run_on_digits_spends_epsilon_once_and_resumes_without_a_second_draw(tmp_path, monkeypatch):
    config, out = _config(), tmp_path / "run"
    train = RunContext.train

    def interrupted(self, *args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(RunContext, "train", interrupted)
    with pytest.raises(KeyboardInterrupt):
        train_run(config, out, progress=False)
    with np.load(out / "noisy_labels" / "stage1.npz") as saved:
        vectors = saved["vectors"].copy()
        assert "labels" not in saved and vectors.shape[1] == 10 and set(np.unique(vectors)) <= {0, 1}

    def no_second_draw(*args, **kwargs):
        raise AssertionError("the resumed run drew the labels again")

    monkeypatch.setattr(RunContext, "train", train)
    monkeypatch.setattr(vlp_method, "release_vector_labels", no_second_draw)
    summary = train_run(config, out, progress=False)
    assert summary["epsilon"] == 4.0 and summary["test_accuracy"] > 0.6
    ledger = PrivacyLedger.load(out / "ledger.json")
    assert [entry.tag for entry in ledger.entries] == ["stage1"] and ledger.epsilon() == 4.0
    with np.load(out / "noisy_labels" / "stage1.npz") as saved:
        assert np.array_equal(saved["vectors"], vectors)


def test_private_test_labels_are_released_by_rr_and_the_metrics_estimated(blobs, tmp_path):
    """On rows whose test labels are private, the run releases them once by RR at its epsilon (the
    existing path of every private method) and estimates its metrics from that release."""
    data = LabeledDataset(
        "blobs",
        blobs.x_train,
        blobs.y_train,
        blobs.x_test,
        PrivateLabels.from_indices(blobs.public_test_labels, 10),
        num_classes=10,
    )
    config = _config(dataset="csv", train=TrainConfig(epochs=3, batch_size=64))
    summary = train_run(config, tmp_path / "run", progress=False, dataset=data)
    ledger = PrivacyLedger.load(tmp_path / "run" / "ledger.json")
    assert [entry.tag for entry in ledger.entries] == ["stage1", "test"]
    assert "randomized response" in ledger.entries[1].description
    assert summary["epsilon"] == 4.0 and "estimated from their release" in summary["test_labels"]
    assert 0.5 < summary["test_accuracy"] <= 1.0 and summary["test_accuracy_se"] > 0


def test_tune_scores_vlp_candidates_on_its_one_release(tmp_path):
    config = _config(train=TrainConfig(epochs=2, batch_size=64, lr=0.02))
    outcome = tune(config, {"lr": ["0.005", "0.05"]}, tmp_path / "tune", progress=False)
    assert outcome["scored_on"] is None and outcome["held_out"] > 0
    assert {r["key"] for r in outcome["results"]} == {"lr=0.005", "lr=0.05"}
    assert all(np.isfinite(r["estimated_clean_accuracy"]) for r in outcome["results"])
    ledger = json.loads((tmp_path / "tune" / "ledger.json").read_text())
    assert [entry["tag"] for entry in ledger["entries"]] == ["stage1"]


def test_vlp_refuses_a_loss_it_does_not_use_before_anything_is_written(tmp_path):
    with pytest.raises(ValueError, match="vlp"):
        train_run(_config(options={"loss": "ce"}), tmp_path / "run", progress=False)
    assert not (tmp_path / "run").exists()
