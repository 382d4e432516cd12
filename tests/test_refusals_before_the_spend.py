"""Inputs that used to fail after a draw, or with a raw traceback, refused with a clear message first;
and refusals no search can turn into a NaN score."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from labeldp.boundary import load_release, privatize_table
from labeldp.cli import main
from labeldp.errors import BudgetError, DataError
from labeldp.randomness import NoiseSource


def _table(tmp_path) -> str:
    rng = np.random.default_rng(0)
    pd.DataFrame({"x": rng.normal(size=200), "y": rng.integers(0, 2, 200)}).to_csv(tmp_path / "t.csv", index=False)
    return str(tmp_path / "t.csv")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--method", "lp-1st", "--epsilon", "1e-320"], "epsilon must be at least 1e-06"),
        (["--method", "pate", "--epsilon", "1", "--delta", "0.5"], "delta 0.5 gives no meaningful guarantee"),
    ],
)
def test_an_epsilon_or_delta_no_accounting_can_honour_is_refused_before_anything_is_written(
    tmp_path, capsys, options, message
) -> None:
    argv = ["train", "--dataset", "csv", "--table", _table(tmp_path), "--label-column", "y", "--classes", "0", "1"]
    assert main([*argv, *options, "--out", str(tmp_path / "run"), "--quiet"]) == 2
    assert message in capsys.readouterr().err and not (tmp_path / "run").exists()


def test_a_truncated_parquet_table_is_named_not_a_traceback(tmp_path, capsys) -> None:
    table = pa.table({"site": [f"s{i % 5}" for i in range(500)], "y": [i % 2 for i in range(500)]})
    pq.write_table(table, tmp_path / "t.parquet")
    data = (tmp_path / "t.parquet").read_bytes()
    (tmp_path / "t.parquet").write_bytes(data[: len(data) // 2])
    argv = ["hashed", "train", "--table", str(tmp_path / "t.parquet"), "--label-column", "y", "--classes", "0", "1"]
    assert main([*argv, "--columns", "site", "--epsilon", "1", "--out", str(tmp_path / "run")]) == 2
    assert "is not a readable Parquet file" in capsys.readouterr().err


def test_a_damaged_or_edited_release_folder_is_refused(tmp_path) -> None:
    pq.write_table(pa.table({"y": [i % 2 for i in range(300)]}), tmp_path / "t.parquet")
    arguments = dict(label_column="y", classes=[0, 1], epsilon=1.0, noise=NoiseSource(insecure_seed=0))
    privatize_table(tmp_path / "t.parquet", tmp_path / "edited", **arguments)
    sidecar = json.loads((tmp_path / "edited" / "release.json").read_text())
    (tmp_path / "edited" / "release.json").write_text(json.dumps({**sidecar, "epsilon": 8.0}))
    with pytest.raises(DataError, match="states epsilon 8 per label, its ledger recorded 1"):
        load_release(tmp_path / "edited")
    privatize_table(tmp_path / "t.parquet", tmp_path / "cut", **arguments)
    labels = tmp_path / "cut" / "labels.parquet"
    labels.write_bytes(labels.read_bytes()[:100])
    with pytest.raises(DataError, match="damaged or truncated"):
        load_release(tmp_path / "cut")


def test_a_damaged_auto_tune_record_is_named(tmp_path, capsys) -> None:
    argv = ["train", "--dataset", "csv", "--table", _table(tmp_path), "--label-column", "y", "--classes", "0", "1"]
    argv += ["--method", "lp-1st", "--epsilon", "1", "--epochs", "1", "--out", str(tmp_path / "run"), "--quiet"]
    assert main(argv) == 0
    record = json.loads((tmp_path / "run" / "auto_tune.json").read_text())
    del record["chosen_options"]
    (tmp_path / "run" / "auto_tune.json").write_text(json.dumps(record))
    (tmp_path / "run" / "summary.json").unlink()
    assert main(argv) == 2
    assert "auto_tune.json is damaged (it lacks chosen_options)" in capsys.readouterr().err


def test_a_release_refused_by_the_budget_stops_a_search_instead_of_scoring_nan() -> None:
    """A search over epsilon whose second candidate the budget refuses: scikit-learn's error_score turned
    the refusal into NaN with a warning; it now stops the search."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GridSearchCV, KFold

    from labeldp import LabelBudget, LabelDPClassifier, PrivateLabels

    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 2))
    y = PrivateLabels((X[:, 0] > 0).astype(int), classes=[0, 1], budget=LabelBudget(1.0))
    search = GridSearchCV(
        LabelDPClassifier(LogisticRegression()), {"epsilon": [0.8, 0.9]}, cv=KFold(2), error_score=np.nan
    )
    with pytest.raises(BudgetError, match="refused before anything was drawn"):
        search.fit(X, y)
    assert y.budget.spent <= 1.0


def test_a_table_as_read_from_csv_fits_by_default_or_is_refused_before_the_release() -> None:
    """Text columns, as pandas.read_csv gives them: the default estimator encodes them as categories;
    one that cannot take them is refused before anything is released, with the fix."""
    from sklearn.linear_model import LogisticRegression

    from labeldp import LabelDPClassifier, LabelDPRegressor, PrivateLabels

    rng = np.random.default_rng(0)
    X = pd.DataFrame({"job": rng.choice(["clerk", "nurse", "chef"], 300), "age": rng.integers(18, 80, 300)})
    y = np.where(X["job"] == "nurse", "yes", "no")
    fitted = LabelDPClassifier(epsilon=2.0, insecure_noise_seed=0).fit(X, PrivateLabels(y, ["no", "yes"]))
    assert fitted.predict(X.iloc[:5]).shape == (5,)
    labels = PrivateLabels(y, ["no", "yes"])
    with pytest.raises(ValueError, match=r"nothing was released\. X has text columns \[.job.\]"):
        LabelDPClassifier(LogisticRegression(), epsilon=1.0).fit(X, labels)
    assert not labels.ledger.entries
    numbers = PrivateLabels(X["age"].to_numpy(dtype=float) / 10)
    with pytest.raises(ValueError, match="nothing was released"):
        LabelDPRegressor(LogisticRegression(), epsilon=1.0, label_range=(0, 10)).fit(X, numbers)
    assert not numbers.ledger.entries
    assert LabelDPRegressor(epsilon=1.0, label_range=(0, 10)).fit(X, numbers).predict(X).shape == (300,)


def test_a_first_run_into_a_new_folder_tells_one_story(tmp_path, capsys) -> None:
    """The auto-tune's release is made in the run's folder: the run that continues from it is not said to
    resume, nor to have changed its configuration; a run stopped and started again is."""
    argv = ["train", "--dataset", "csv", "--table", _table(tmp_path), "--label-column", "y", "--classes", "0", "1"]
    argv += ["--method", "lp-1st", "--epsilon", "1", "--epochs", "1", "--out", str(tmp_path / "run")]
    assert main(argv) == 0
    said = capsys.readouterr()
    assert "resuming" not in said.out + said.err and "configuration changed" not in said.out + said.err
    assert "epsilon 1 per row (delta 0" in said.out
    (tmp_path / "run" / "summary.json").unlink()
    assert main(argv) == 0
    assert "resuming" in capsys.readouterr().out


def test_labeldp_report_reads_a_runs_folder_and_a_folder_of_runs(tmp_path, capsys) -> None:
    """A demo's folder (runs side by side, no results.csv) and a run's own folder are reported like a sweep."""
    table = _table(tmp_path)
    (tmp_path / "public").mkdir()
    test_table = _table(tmp_path / "public")  # measured whatever the noise: released test labels may not measure it
    for seed in ("0", "1"):
        argv = ["train", "--dataset", "csv", "--table", table, "--test-table", test_table, "--label-column", "y"]
        argv += ["--classes", "0", "1"]
        argv += ["--method", "lp-1st", "--epsilon", "1", "--epochs", "1", "--tune-budget", "0", "--seed", seed]
        assert main([*argv, "--quiet", "--out", str(tmp_path / "runs" / f"run{seed}")]) == 0
    capsys.readouterr()
    assert main(["report", str(tmp_path / "runs")]) == 0
    out = capsys.readouterr().out
    assert "eps=1" in out and "(2)" in out and "epsilon 2 per row spent in all by 2 releases" in out
    assert main(["report", str(tmp_path / "runs" / "run0")]) == 0 and "(1)" in capsys.readouterr().out
    assert main(["report", str(tmp_path)]) == 0  # the folder above: the same two runs


def test_the_console_and_the_summary_name_the_network(tmp_path, capsys) -> None:
    argv = ["train", "--dataset", "csv", "--table", _table(tmp_path), "--label-column", "y", "--classes", "0", "1"]
    argv += [
        "--method",
        "lp-1st",
        "--epsilon",
        "1",
        "--epochs",
        "1",
        "--tune-budget",
        "0",
        "--out",
        str(tmp_path / "r"),
    ]
    assert main(argv) == 0
    assert "network: mlp (the rule's choice for these inputs)" in capsys.readouterr().out
    assert json.loads((tmp_path / "r" / "summary.json").read_text())["network"] == "mlp"


@pytest.mark.parametrize(
    ("arguments", "named"),
    [({"cv": 5}, "Change cv: a stratified split"), ({"scoring": "roc_auc"}, "Change scoring: a metric")],
)
def test_a_search_that_reads_private_labels_is_told_which_argument_to_change(arguments, named) -> None:
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GridSearchCV, KFold

    from labeldp import LabelDPClassifier, PrivateLabelAccessError, PrivateLabels

    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 2))
    search = GridSearchCV(LabelDPClassifier(LogisticRegression()), {"epsilon": [1.0]}, **{"cv": KFold(5), **arguments})
    with pytest.raises(PrivateLabelAccessError, match=named):
        search.fit(X, PrivateLabels((X[:, 0] > 0).astype(int), [0, 1]))
