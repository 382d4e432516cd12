"""A run end to end (runs/run.py): what it writes, the non-private reference, refusals before
anything is written, a folder of another configuration refused, a finished run not repeated, and a
crash between the labels and the ledger recorded once."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
import torch

import labeldp.runs.context as run_module
from labeldp.accounting import PrivacyLedger
from labeldp.boundary import unseal
from labeldp.config.dpsgd import DPSGDConfig
from labeldp.errors import RunDirectoryError
from labeldp.runs import RunConfig, train_run
from labeldp.training import TrainConfig, train_stage

FAST = TrainConfig(epochs=3, batch_size=64, lr=0.05)


def test_lp2st_run_writes_everything(blobs, tmp_path) -> None:
    config = RunConfig(dataset="csv", method="lp-2st", epsilon=2.0, train=FAST)
    summary = train_run(config, tmp_path / "run", progress=False, dataset=blobs)
    for name in (
        "config.json",
        "ledger.json",
        "metrics.jsonl",
        "summary.json",
        "model.pt",
        "noisy_labels/stage1.npz",
        "noisy_labels/stage2.npz",
    ):
        assert (tmp_path / "run" / name).exists(), name
    assert {"test_accuracy", "epsilon", "method", "dataset", "seconds"} <= set(summary)
    assert summary["epsilon"] == pytest.approx(2.0, abs=2e-4)
    assert 0.0 <= summary["test_accuracy"] <= 1.0
    ledger = PrivacyLedger.load(tmp_path / "run" / "ledger.json")
    assert [e.tag for e in ledger.entries] == ["stage1", "stage2"]
    assert ledger.entries[0].members.sum() + ledger.entries[1].members.sum() == 600
    assert not np.any(ledger.entries[0].members & ledger.entries[1].members)
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [(r["stage"], r["epoch"]) for r in rows] == [(s, e) for s in (1, 2) for e in (1, 2, 3)]
    assert json.loads((tmp_path / "run" / "summary.json").read_text()) == summary


def test_non_private_reference_reports_infinite_epsilon(blobs, tmp_path) -> None:
    summary = train_run(
        RunConfig(dataset="csv", method="non-private", train=FAST), tmp_path / "np", progress=False, dataset=blobs
    )
    assert summary["epsilon"] == "inf"  # printed and stored alike
    assert PrivacyLedger.load(tmp_path / "np" / "ledger.json").epsilon() == math.inf
    assert summary["test_accuracy"] > 0.9


def test_amp_off_a_gpu_is_refused_before_anything_is_written(blobs, tmp_path) -> None:
    config = RunConfig(dataset="csv", method="lp-1st", epsilon=1.0, train=TrainConfig(epochs=1, amp=True))
    with pytest.raises(ValueError, match="amp .* is for CUDA GPUs; this run is on cpu"):
        train_run(config, tmp_path / "run", device="cpu", progress=False, dataset=blobs)
    assert not (tmp_path / "run").exists()
    with pytest.raises(ValueError, match="is for CUDA GPUs"):  # the library function too
        train_stage(
            torch.nn.Linear(blobs.x_train.shape[1], blobs.num_classes),
            blobs.x_train,
            unseal(blobs.y_train).copy(),
            blobs.num_classes,
            config.train,
            progress=False,
        )


def test_existing_directory_with_other_config_is_refused(blobs, tmp_path) -> None:
    train_run(
        RunConfig(dataset="csv", method="lp-1st", epsilon=1.0, train=FAST),
        tmp_path / "run",
        progress=False,
        dataset=blobs,
    )
    with pytest.raises(RunDirectoryError, match="differs in: epsilon"):
        train_run(
            RunConfig(dataset="csv", method="lp-1st", epsilon=2.0, train=FAST),
            tmp_path / "run",
            progress=False,
            dataset=blobs,
        )


def test_finished_run_is_not_repeated(blobs, tmp_path, monkeypatch) -> None:
    config = RunConfig(dataset="csv", method="lp-1st", epsilon=1.0, train=FAST)
    first = train_run(config, tmp_path / "run", progress=False, dataset=blobs)
    ledger_before = (tmp_path / "run" / "ledger.json").read_bytes()
    monkeypatch.setattr(run_module, "train_stage", lambda *a, **k: pytest.fail("trained again"))
    assert train_run(config, tmp_path / "run", progress=False, dataset=blobs) == first
    assert (tmp_path / "run" / "ledger.json").read_bytes() == ledger_before


def test_crash_between_labels_and_ledger_records_the_spend_once(blobs, tmp_path, monkeypatch) -> None:
    config = RunConfig(dataset="csv", method="lp-1st", epsilon=1.0, train=FAST)
    monkeypatch.setattr(PrivacyLedger, "save", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt))
    with pytest.raises(KeyboardInterrupt):
        train_run(config, tmp_path / "run", progress=False, dataset=blobs)
    monkeypatch.undo()
    assert (tmp_path / "run" / "noisy_labels" / "stage1.npz").exists()
    assert not (tmp_path / "run" / "ledger.json").exists()
    summary = train_run(config, tmp_path / "run", progress=False, dataset=blobs)
    ledger = PrivacyLedger.load(tmp_path / "run" / "ledger.json")
    assert [e.tag for e in ledger.entries] == ["stage1"] and summary["epsilon"] == pytest.approx(1.0, abs=2e-4)


def test_privacy_units_must_be_the_datasets_under_a_method_that_composes_per_unit(blobs, tmp_path) -> None:
    """Before anything is written: a configuration naming a privacy unit for a dataset without units, and a
    dataset whose units have several rows under DP-SGD (add-or-remove neighbours) or PATE (teachers hold rows)."""
    import dataclasses

    from labeldp.errors import ConfigError

    named = RunConfig(dataset="csv", method="lp-1st", epsilon=1.0, privacy_unit="user", max_rows_per_unit=2)
    with pytest.raises(ConfigError, match="has no privacy units"):
        train_run(named, tmp_path / "named", progress=False, dataset=blobs)
    grouped = dataclasses.replace(blobs, units=np.arange(blobs.private_rows) // 2)
    for method, message in (("dp-sgd", "protects examples"), ("pate", "teachers hold rows")):
        config = RunConfig(dataset="csv", method=method, epsilon=1.0)
        with pytest.raises(ConfigError, match=message):
            train_run(config, tmp_path / method, progress=False, dataset=grouped)
    assert not any(tmp_path.iterdir())


@pytest.mark.filterwarnings("ignore:.*match no published checksum")
def test_the_network_a_run_trains_is_recorded_and_dpsgd_defaults_to_one_without_batch_norm(tmp_path) -> None:
    """28x28 images without a named network: the label-DP run trains the ConvNet, DP-SGD the small CNN
    (it refuses batch norm), each recorded in data.json and config.json; a folder saved before either
    recorded the network (config and data.json naming none) still loads, as the small CNN it then trained."""
    from labeldp.models import ConvNet, SmallCNN
    from labeldp.runs import load_run_model
    from tests.helpers import make_mnist_folder

    make_mnist_folder(tmp_path / "fashion", n_train=60, n_test=20)
    train = TrainConfig(epochs=1, batch_size=16, lr=0.05)
    base = RunConfig(dataset="fashion-mnist", data_dir=str(tmp_path / "fashion"), epsilon=2.0, train=train)
    runs = {
        "lp-1st": (dataclasses.replace(base, method="lp-1st"), "convnet", ConvNet),
        # a noise multiplier given (epsilon 1.45 here): no calibration (seconds) to wait for
        "dp-sgd": (
            dataclasses.replace(base, method="dp-sgd", delta=1e-5, options=DPSGDConfig(noise_multiplier=2.0)),
            "cnn",
            SmallCNN,
        ),
    }
    for name, (config, model, model_type) in runs.items():
        train_run(config, tmp_path / name, progress=False)
        assert json.loads((tmp_path / name / "data.json").read_text())["model"] == model
        assert isinstance(load_run_model(tmp_path / name), model_type)
        assert json.loads((tmp_path / name / "config.json").read_text())["model"] == model
    config_path, data_path = tmp_path / "dp-sgd" / "config.json", tmp_path / "dp-sgd" / "data.json"
    facts = json.loads(data_path.read_text())
    del facts["model"]
    data_path.write_text(json.dumps(facts))
    config_path.write_text(json.dumps({**json.loads(config_path.read_text()), "model": None}))
    assert isinstance(load_run_model(tmp_path / "dp-sgd"), SmallCNN)


@pytest.mark.filterwarnings("ignore:.*match no published checksum")
def test_a_folder_saved_before_the_network_was_recorded_is_compared_by_the_network_it_trained(tmp_path, capsys) -> None:
    """A 28x28 run saved naming no network, before data.json recorded one, trained the small CNN: the
    same configuration naming the small CNN finds it finished; the rule's network now (the
    ConvNet) is a different configuration, refused for a finished run, and for an unfinished one
    trained afresh from its saved release; an audit reruns the network the run trained."""
    from labeldp.audit.label_inference import audited_config
    from labeldp.errors import RunDirectoryError
    from tests.helpers import make_mnist_folder

    make_mnist_folder(tmp_path / "mnist", n_train=60, n_test=20)
    train = TrainConfig(epochs=1, batch_size=16, lr=0.05)
    small = RunConfig(dataset="mnist", data_dir=str(tmp_path / "mnist"), method="lp-1st", epsilon=2.0, train=train)
    small = dataclasses.replace(small, model="cnn")
    folder = tmp_path / "old"
    summary = train_run(small, folder, progress=False)

    def as_saved_before() -> None:
        config = json.loads((folder / "config.json").read_text())
        facts = json.loads((folder / "data.json").read_text())
        (folder / "config.json").write_text(json.dumps({**config, "model": None}))
        (folder / "data.json").write_text(json.dumps({k: v for k, v in facts.items() if k != "model"}))

    as_saved_before()
    assert train_run(small, folder, progress=False) == summary
    assert audited_config(folder).model == "cnn"
    rule = dataclasses.replace(small, model=None)
    with pytest.raises(RunDirectoryError, match=r"finished run with a different configuration \(differs in: model\)"):
        train_run(rule, folder, progress=False)
    (folder / "summary.json").unlink()
    train_run(rule, folder, progress=True)
    assert "configuration changed (model)" in capsys.readouterr().out
    assert json.loads((folder / "data.json").read_text())["model"] == "convnet"


def test_folders_of_other_shapes_and_of_fitted_models_saved_before_are_the_same_runs(tmp_path) -> None:
    """The digits (the MLP: the rule has not changed for their shape) saved before data.json recorded the
    network, and a marginals run (a fitted model) whose data.json names a network, as one version wrote:
    the same configuration finds each finished, a sweep counts it done, an audit reruns what it trained."""
    from labeldp.audit.label_inference import audited_config
    from labeldp.experiments.sweep_runner import _finished_as_configured
    from labeldp.runs import RunDirectory

    digits = RunConfig(dataset="digits", method="lp-1st", epsilon=2.0, train=TrainConfig(epochs=1))
    marginals = RunConfig(dataset="digits", method="marginals", epsilon=8.0)
    for name, config, recorded in (("digits", digits, {}), ("marginals", marginals, {"model": "mlp"})):
        folder = tmp_path / name
        summary = train_run(config, folder, progress=False)
        facts = json.loads((folder / "data.json").read_text())
        facts = {**{k: v for k, v in facts.items() if k != "model"}, **recorded}
        (folder / "data.json").write_text(json.dumps(facts))
        assert train_run(config, folder, progress=False) == summary
        assert _finished_as_configured(RunDirectory(folder), config)
    assert audited_config(tmp_path / "digits").model == "mlp"
    assert audited_config(tmp_path / "marginals").model is None


def test_an_unfinished_run_with_private_test_labels_resumes_with_more_epochs(tmp_path) -> None:
    """The test rows' release reads no model: training options changed on resume keep it, and the run spends
    nothing more."""
    import dataclasses as dc

    from tests.helpers import table_config, write_table

    write_table(tmp_path / "t.csv", rows=80)
    config = table_config(tmp_path / "t.csv", insecure_noise_seed=3)
    train_run(config, tmp_path / "run", progress=False)
    with np.load(tmp_path / "run" / "noisy_labels" / "test.npz") as test:
        released = test["labels"].copy()
    for name in ("summary.json", "model.pt", "metrics.jsonl"):  # unfinished: stopped after its releases
        (tmp_path / "run" / name).unlink(missing_ok=True)
    more = dc.replace(config, train=dc.replace(config.train, epochs=2))
    summary = train_run(more, tmp_path / "run", progress=False)
    assert [e.tag for e in PrivacyLedger.load(tmp_path / "run" / "ledger.json").entries] == ["stage1", "test"]
    with np.load(tmp_path / "run" / "noisy_labels" / "test.npz") as test:
        assert np.array_equal(test["labels"], released)
    assert summary["epsilon"] == pytest.approx(1.0, abs=1e-3)
