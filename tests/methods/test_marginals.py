"""``labeldp train --method marginals``: the logistic regression over public feature bins, fitted from
one release of noisy label marginals, as a run (folder, ledger, resume, predict, sweeps, profiles)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.metrics import roc_auc_score

import labeldp.methods.marginals as marginals_method
from labeldp.boundary import PrivateLabels
from labeldp.cli import main
from labeldp.config.marginals_config import MarginalsConfig
from labeldp.errors import ConfigError, RunDirectoryError
from labeldp.experiments.sweep_report import aggregate
from labeldp.experiments.sweep_runner import SweepJob, run_sweep
from labeldp.recipes import get_profile, list_profiles
from labeldp.runs import RunConfig, RunDirectory, config_dataset, load_run_model, train_run
from labeldp.runs.predictor import load_predictor


def _rows(n: int, seed: int) -> pd.DataFrame:
    """An easy table with rare positives: a numeric column with missing values, a categorical one, an
    id; about 3 % positive, driven by the number and one category."""
    rng = np.random.default_rng(seed)
    score = rng.normal(size=n)
    channel = rng.choice(["web", "mail", "phone", None], n, p=[0.4, 0.3, 0.2, 0.1])
    logit = -4.6 + 1.6 * score + 1.5 * (channel == "mail")
    return pd.DataFrame(
        {
            "id": np.arange(n) + 10_000 * seed,
            "score": np.where(rng.random(n) < 0.05, np.nan, score),
            "channel": channel,
            "visits": rng.poisson(2, n),
            "bought": (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(int),
        }
    )


@pytest.fixture
def tables(tmp_path: Path) -> tuple[Path, Path]:
    train, test = tmp_path / "shop.csv", tmp_path / "shop-test.csv"
    _rows(6000, 0).to_csv(train, index=False)
    _rows(3000, 1).to_csv(test, index=False)
    return train, test


def _config(train: Path, test: Path | None = None, **fields) -> RunConfig:
    return RunConfig(
        dataset="csv",
        table=str(train),
        test_table=str(test) if test is not None else None,
        label_column="bought",
        id_column="id",
        classes=("0", "1"),
        **{"method": "marginals", "epsilon": 2.0, **fields},
    )


def test_a_run_releases_the_marginals_once_and_learns_the_rare_positives(tables, tmp_path, capsys) -> None:
    train, test = tables
    out = tmp_path / "run"
    argv = ["train", "--dataset", "csv", "--table", str(train), "--test-table", str(test), "--label-column", "bought"]
    argv += ["--id-column", "id", "--classes", "0", "1", "--method", "marginals", "--epsilon", "2", "--out", str(out)]
    assert main([*argv, "--quiet"]) == 0
    headline = capsys.readouterr().out
    assert "AUC" in headline and "log-loss" in headline  # accuracy alone hides rare positives
    ledger = RunDirectory(out).read_ledger()
    assert [entry.tag for entry in ledger.entries] == ["marginals"]  # the test table is public: nothing else
    assert ledger.epsilon() == pytest.approx(2.0)
    assert ledger.entries[0].event.sensitivity == 3  # one feature per raw column (score, visits, channel), not the id
    summary = json.loads((out / "summary.json").read_text())
    assert summary["method"] == "marginals" and summary["epsilon"] == pytest.approx(2.0)
    assert summary["test_auc"] > 0.75 and 0 < summary["test_log_loss"] < 0.2  # 3 % positives: the base rate's ~0.14
    assert summary["marginals"]["features"] == 3 and summary["marginals"]["noise_scale"] == pytest.approx(1.5)
    config = json.loads((out / "config.json").read_text())
    assert (config["bins"], config["l2"]) == (16, 100.0) and "loss" not in config  # its options, no other's
    with np.load(out / "noisy_labels" / "marginals.npz") as saved:
        assert saved["counts"].shape == (int(saved["bins_per_feature"].sum()), 2)
        assert saved["members"].size == 6000

    scores = tmp_path / "scores.csv"
    assert main(["predict", str(out), "--table", str(test), "--out", str(scores), "--id-column", "id"]) == 0
    predicted = pd.read_csv(scores)
    truth = pd.read_csv(test)
    assert list(predicted.columns) == ["id", "p_0", "p_1", "predicted"] and len(predicted) == len(truth)
    assert roc_auc_score(truth["bought"], predicted["p_1"]) == pytest.approx(summary["test_auc"], abs=1e-6)


def test_a_privacy_units_marginals_cover_its_rows_and_the_summary_states_that_noise(tmp_path) -> None:
    train, test = tmp_path / "shop.csv", tmp_path / "shop-test.csv"
    _rows(3000, 0).assign(user=np.arange(3000) // 4).to_csv(train, index=False)
    _rows(1000, 1).assign(user=0).to_csv(test, index=False)
    config = _config(train, test, privacy_unit="user", max_rows_per_unit=3)
    summary = train_run(config, tmp_path / "run", progress=False)
    event = RunDirectory(tmp_path / "run").read_ledger().entries[0].event
    assert event.sensitivity == 3 * 3 and summary["epsilon"] == pytest.approx(2.0)  # 3 features x 3 rows a unit
    assert summary["marginals"]["noise_scale"] == pytest.approx(4.5) == 1 / event.noise_parameter


def test_a_resumed_run_reads_its_release_back_and_draws_nothing(tables, tmp_path, monkeypatch) -> None:
    train, test = tables
    out = tmp_path / "run"
    first = train_run(_config(train, test), out, progress=False)
    ledger = (out / "ledger.json").read_bytes()
    (out / "summary.json").unlink()  # as if interrupted after the release
    (out / "model.pt").unlink()

    def refuse(*args, **kwargs):
        raise AssertionError("a resumed run drew the marginals again")

    monkeypatch.setattr(marginals_method, "release_label_marginals", refuse)
    again = train_run(_config(train, test), out, progress=False)
    assert again["test_auc"] == pytest.approx(first["test_auc"]) and (out / "ledger.json").read_bytes() == ledger
    (out / "summary.json").unlink()
    stronger = train_run(
        _config(train, test, options=MarginalsConfig(l2=1000.0)), out, progress=False
    )  # after the release
    assert (out / "ledger.json").read_bytes() == ledger and stronger["test_auc"] != again["test_auc"]
    (out / "summary.json").unlink()
    with pytest.raises(RunDirectoryError, match="depend on what changed"):  # the bins shape the release
        train_run(_config(train, test, options=MarginalsConfig(bins=4)), out, progress=False)


def test_a_changed_table_is_refused_rather_than_fitted_on_counts_of_other_bins(tables, tmp_path) -> None:
    train, test = tables
    out = tmp_path / "run"
    train_run(_config(train, test), out, progress=False)
    (out / "summary.json").unlink()
    pd.concat([_rows(6000, 0).iloc[:3000], _rows(3000, 5)]).to_csv(train, index=False)  # same path, other rows
    with pytest.raises(RunDirectoryError, match="other bins"):
        train_run(_config(train, test), out, progress=False)


def test_the_bins_are_cut_from_public_inputs_alone(tables, tmp_path) -> None:
    train, _ = tables
    permuted = tmp_path / "permuted.csv"
    frame = pd.read_csv(train)
    frame.assign(bought=np.random.default_rng(3).permutation(frame["bought"].to_numpy())).to_csv(permuted, index=False)
    states = []
    for path in (train, permuted):
        config = _config(path).resolved()
        data = config_dataset(config)
        sealed = dataclasses.replace(data, y_train=PrivateLabels.withheld(len(data.y_train), 2))  # unreadable
        model, bins = marginals_method.public_bins(SimpleNamespace(config=config, data=sealed))
        states.append((model.state_dict(), bins))
    (first, bins), (second, other) = states
    assert first.keys() == second.keys() and all(torch.equal(first[k], second[k]) for k in first)
    assert np.array_equal(bins, other)
    assert len(model.bins_per_feature) == 3 and model.bins_per_feature[0] == 17  # 16 quantile bins and the missing
    assert model.bins_per_feature[2] == 5  # channel: web, mail, phone, missing (one-hot's own category), unseen


def test_the_method_refuses_what_it_does_not_use(tables, tmp_path, capsys) -> None:
    train, test = tables
    base = ["train", "--dataset", "csv", "--table", str(train), "--label-column", "bought", "--classes", "0", "1"]
    for extra, message in (
        (["--method", "marginals", "--epsilon", "1", "--temperature", "2"], "does not use temperature"),
        (["--method", "marginals", "--epsilon", "1", "--epochs", "3"], "does not use the training options epochs"),
        (["--method", "marginals", "--epsilon", "1", "--model", "mlp"], "leave --model out"),
        (["--method", "marginals", "--epsilon", "1", "--bins", "1"], "marginals.bins must be an integer >= 2"),
        (["--method", "marginals", "--epsilon", "1", "--l2", "0"], "marginals.l2 must be"),
        (["--method", "lp-1st", "--epsilon", "1", "--bins", "8"], "'lp-1st' does not use bins"),
        (["--method", "marginals"], "needs --epsilon"),
    ):
        assert main([*base, *extra, "--out", str(tmp_path / "run"), "--quiet"]) == 2
        assert message in capsys.readouterr().err
    assert not (tmp_path / "run").exists()
    tune = ["tune", *base[1:], "--method", "marginals", "--epsilon", "1", "--grid", "l2=10,100"]
    assert main([*tune, "--out", str(tmp_path / "tune")]) == 2
    assert "its release is label counts per bin" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="numeric labels use rr-on-bins"):
        train_run(
            RunConfig(
                dataset="csv",
                table=str(train),
                label_column="visits",
                label_range=(0, 10),
                method="marginals",
                epsilon=1,
            ),
            tmp_path / "regression",
            progress=False,
        )


def test_inputs_of_another_dataset_are_binned_value_by_value(tmp_path) -> None:
    summary = train_run(
        RunConfig(dataset="digits", method="marginals", epsilon=8.0), tmp_path / "digits", progress=False
    )
    assert summary["marginals"]["features"] == 64 and summary["test_accuracy"] > 0.5
    model = load_run_model(tmp_path / "digits")
    assert model.coef.shape == (summary["marginals"]["total_bins"], 10)


def test_profiles_name_their_tables_under_the_data_folder(tmp_path) -> None:
    keys = {p.key for p in list_profiles(r"(hillstrom-conversion|adult-income)/")}
    for table in ("hillstrom-conversion", "adult-income"):
        assert f"{table}/non-private/run0" in keys
        for epsilon in ("0.5", "1", "2", "4"):
            assert {f"{table}/e{epsilon}/{method}/run0" for method in ("lp-1st", "marginals")} <= keys
    profile = get_profile("hillstrom-conversion/e1/marginals/run0").config
    resolved = profile.with_overrides(data_dir=str(tmp_path)).resolved()
    assert resolved.table == str(tmp_path / "hillstrom" / "hillstrom.csv.gz") and resolved.drop == ("visit", "spend")
    adult = get_profile("adult-income/e0.5/marginals/run0").config.with_overrides(data_dir=str(tmp_path)).resolved()
    assert adult.test_table == str(tmp_path / "adult" / "adult-test.csv.gz") and adult.epsilon == 0.5
    absolute = _config(tmp_path / "shop.csv").with_overrides(data_dir="/elsewhere").resolved()
    assert absolute.table == str(tmp_path / "shop.csv")  # an absolute path stays as it is


def test_a_sweep_over_two_tables_reports_them_apart(tables, tmp_path) -> None:
    train, test = tables
    other = tmp_path / "data" / "ads" / "ads.csv"
    other.parent.mkdir(parents=True)
    _rows(2000, 7).to_csv(other, index=False)
    jobs = [
        SweepJob("shop/e2/marginals/run0", _config(train, test)),
        # a relative path: the table is read under the sweep's --data-dir
        SweepJob("ads/e2/marginals/run0", _config(Path("ads/ads.csv"), test_labels="public")),
    ]
    rows = run_sweep(jobs, tmp_path / "sweep", data_dir=str(tmp_path / "data"), progress=False)
    assert [row["status"] for row in rows] == ["done", "done"], [row["error"] for row in rows]
    assert [row["dataset"] for row in rows] == ["shop", "ads"]
    stats = aggregate([{k: str(v) for k, v in row.items()} for row in rows])  # two classes: AUC by default
    assert {s["metric"] for s in stats} == {"auc"}, rows
    assert sorted((s["dataset"], s["method"], s["runs"]) for s in stats) == [
        ("ads", "marginals", 1),
        ("shop", "marginals", 1),
    ]
    predictor = load_predictor(tmp_path / "sweep" / "ads__e2__marginals__run0")
    assert predictor.predict_proba(pd.read_csv(other).head(5)).shape == (5, 2)
