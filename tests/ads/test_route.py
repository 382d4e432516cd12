"""The ads route as one call (labeldp.ads.route): the run folder, the ledger's epsilon per unit and per
row, the refusal to spend twice, predictions hashed as the training rows were, and labels from a noisy
source recorded as the source's statement."""

from __future__ import annotations

import json
import math

import numpy as np
import pyarrow.parquet as pq
import pytest
from sklearn.metrics import log_loss, roc_auc_score

from labeldp.accounting import PrivacyLedger
from labeldp.ads import fit_from_noisy_source, fit_hashed, predict_hashed
from labeldp.ads.folder import FILES
from labeldp.data.hashed_table import read_column
from labeldp.errors import ConfigError, DataError, ReleaseExistsError, RunDirectoryError
from labeldp.randomness import NoiseSource

SEEDED = NoiseSource(insecure_seed=1)


def _fit(ads, spec, out, **options):
    settings = {"label_column": "converted", "classes": [0, 1], "spec": spec, "epsilon": 4.0, "noise": SEEDED}
    return fit_hashed(ads[0], out, **{**settings, "block_rows": 2048, **options})


@pytest.mark.parametrize("route, model", [("counts", "lr"), ("rr", "lr"), ("rr", "fm")])
def test_a_run_releases_once_per_unit_trains_and_predicts_with_its_hashing(ads, spec, tmp_path, route, model) -> None:
    out = tmp_path / "run"
    summary = _fit(ads, spec, out, route=route, model=model, unit_column="user_id", max_rows_per_unit=2)
    assert sorted(p.name for p in out.iterdir()) == sorted([*FILES, ".lock", ".dataset-release"])
    assert summary == json.loads((out / "summary.json").read_text())
    units = read_column(ads[0], "user_id")
    kept = np.bincount(np.unique(units, return_inverse=True)[1])
    assert summary["members"] == np.minimum(kept, 2).sum() and summary["rows"] == 6000
    assert summary["epsilon_per_unit"] == pytest.approx(4.0, abs=1e-2)  # a unit's two rows together
    assert summary["epsilon_per_row"] == pytest.approx(2.0, abs=1e-2)
    assert summary["route"] == route and summary["rows_per_second"] > 0 and not summary["private"]
    ledger = PrivacyLedger.load(out / "ledger.json")
    assert ledger.epsilon() == pytest.approx(4.0, abs=1e-2) and ledger.units is not None
    probabilities = predict_hashed(out, ads[1])
    labels = read_column(ads[1], "converted")
    assert probabilities.shape == (3000,) and roc_auc_score(labels, probabilities) > 0.65
    assert abs(probabilities.mean() - labels.mean()) < 0.04  # the intercept calibrated to the released rate
    quality = summary["quality"]
    if route == "counts":  # no row's label was released: nothing to estimate on
        assert set(quality) == {"on"} and "--test-table" in quality["on"]
    else:  # estimated on the released labels of the rows it trained on, within range, with intervals
        assert quality["on"].startswith("the released labels of the rows it trained on (in-sample")
        low, high = quality["auc_interval"]
        assert 0 <= low <= quality["auc"] <= high <= 1 and quality["beyond_chance"]
        assert quality["log_loss"] > 0 and quality["log_loss_se"] > 0


def test_a_public_test_table_measures_the_model_and_is_checked_before_the_release(ads, spec, tmp_path) -> None:
    """--test-table: the model's exact AUC and log-loss on it, in the summary; a test table without the
    label column is refused before anything is drawn."""
    summary = _fit(ads, spec, tmp_path / "run", route="rr", test_table=str(ads[1]))
    quality = summary["quality"]
    labels, probabilities = read_column(ads[1], "converted"), predict_hashed(tmp_path / "run", ads[1])
    assert quality["on"] == f"the public test table {ads[1]}"
    assert quality["auc"] == pytest.approx(roc_auc_score(labels, probabilities))
    assert quality["log_loss"] == pytest.approx(log_loss(labels, probabilities))
    unlabelled = tmp_path / "unlabelled.parquet"
    pq.write_table(pq.read_table(ads[1]).drop(["converted"]), unlabelled)
    with pytest.raises(DataError, match="lacks the columns"):
        _fit(ads, spec, tmp_path / "refused", test_table=str(unlabelled))
    assert not (tmp_path / "refused" / "ledger.json").exists()


def test_a_finished_run_is_never_released_into_again(ads, spec, tmp_path) -> None:
    out = tmp_path / "run"
    _fit(ads, spec, out, route="rr")
    ledger = (out / "ledger.json").read_text()
    with pytest.raises(ReleaseExistsError, match="spend their budget a second time"):
        _fit(ads, spec, out, route="rr")
    assert (out / "ledger.json").read_text() == ledger


def test_an_unfinished_run_continues_from_its_saved_release_without_a_second_draw(ads, spec, tmp_path) -> None:
    out = tmp_path / "run"
    _fit(ads, spec, out, route="rr")
    release, ledger = (out / "release.npz").read_bytes(), (out / "ledger.json").read_text()
    (out / "summary.json").unlink()  # as if training had been interrupted
    _fit(ads, spec, out, route="rr", noise=NoiseSource(insecure_seed=1))
    assert (out / "release.npz").read_bytes() == release and (out / "ledger.json").read_text() == ledger
    (out / "summary.json").unlink()
    with pytest.raises(ReleaseExistsError, match="other settings"):
        _fit(ads, spec, out, route="rr", epsilon=2.0)


def test_a_run_stopped_between_its_release_and_its_ledger_records_the_saved_release_never_a_second_draw(
    ads, spec, tmp_path, monkeypatch
) -> None:
    out = tmp_path / "run"

    def interrupted(self, *args, **kwargs):
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(PrivacyLedger, "save", interrupted)
        with pytest.raises(KeyboardInterrupt):
            _fit(ads, spec, out, route="rr")
    assert (out / "release.npz").exists() and not (out / "ledger.json").exists()
    release = (out / "release.npz").read_bytes()
    with pytest.raises(ReleaseExistsError, match="other settings"):  # released: never drawn again, under any settings
        _fit(ads, spec, out, route="rr", epsilon=2.0)
    summary = _fit(ads, spec, out, route="rr")
    assert (out / "release.npz").read_bytes() == release
    ledger = PrivacyLedger.load(out / "ledger.json")
    assert [entry.tag for entry in ledger.entries] == ["labels"] and summary["epsilon_per_unit"] == pytest.approx(4.0)


def test_a_ledger_whose_release_file_is_missing_is_refused_never_drawn_again(ads, spec, tmp_path) -> None:
    out = tmp_path / "run"
    _fit(ads, spec, out, route="rr")
    (out / "summary.json").unlink()
    (out / "release.npz").unlink()
    with pytest.raises(RunDirectoryError, match="is missing"):
        _fit(ads, spec, out, route="rr")
    assert not (out / "release.npz").exists()


def test_errors_come_before_any_spend(ads, spec, tmp_path) -> None:
    out = tmp_path / "run"
    with pytest.raises(ConfigError, match="logistic regression"):
        _fit(ads, spec, out, route="counts", model="fm")
    with pytest.raises(ConfigError, match="--privacy-unit"):
        _fit(ads, spec, out, max_rows_per_unit=3)
    with pytest.raises(ConfigError, match="two classes"):
        _fit(ads, spec, out, classes=[0, 1, 2])
    with pytest.raises(DataError, match="lacks the columns"):
        _fit(ads, spec, out, unit_column="household")
    with pytest.raises(ConfigError, match="epsilon"):
        _fit(ads, spec, out, epsilon=0)
    assert not (out / "ledger.json").exists()
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(RunDirectoryError, match="not a run's"):
        _fit(ads, spec, tmp_path / "other")


def test_labels_from_a_noisy_source_record_the_sources_statement_never_a_draw(ads, spec, tmp_path) -> None:
    out = tmp_path / "source"
    summary = fit_from_noisy_source(
        ads[0], out, label_column="converted", classes=[0, 1], spec=spec, channel="flip:0.1", block_rows=2048
    )
    assert summary["route"] == "source" and "recorded, not drawn by labeldp" in summary["release"]
    assert summary["epsilon_per_unit"] == pytest.approx(math.log(9), abs=1e-3)  # flip 0.1: RR at log 9, exact
    entry = json.loads((out / "ledger.json").read_text())["entries"]
    assert [e["tag"] for e in entry] == ["source"]
    stated = fit_from_noisy_source(
        ads[0],
        tmp_path / "stated",
        label_column="converted",
        classes=[0, 1],
        spec=spec,
        channel=[[0.9, 0.1], [0.1, 0.9]],
        stated_epsilon=3.0,
        unit_column="user_id",
        max_rows_per_unit=2,
        block_rows=2048,
    )
    assert stated["epsilon_per_unit"] == pytest.approx(6.0, abs=1e-2)  # a user's two reports compose
    assert stated["epsilon_per_row"] == pytest.approx(3.0, abs=1e-2)
    assert roc_auc_score(read_column(ads[1], "converted"), predict_hashed(out, ads[1])) > 0.6
    with pytest.raises(ConfigError, match="implies"):
        fit_from_noisy_source(
            ads[0],
            tmp_path / "x",
            label_column="converted",
            classes=[0, 1],
            spec=spec,
            channel="flip:0.1",
            stated_epsilon=1.0,
        )
