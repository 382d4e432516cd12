"""A table of the user's own (data/table.py): CSV and Parquet files, the label domain declared and
never read off the private labels, columns as they come (categorical, boolean, missing values,
dropped, an id), and a numeric label on its declared range."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from labeldp.boundary import unseal
from labeldp.cli import main
from labeldp.data import TableOptions, load_dataset, snap_to_grid
from labeldp.errors import ConfigError


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_tables(tmp_path, suffix: str) -> None:
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        {"a": rng.normal(size=100), "b": rng.normal(size=100), "outcome": rng.choice(["no", "yes", "maybe"], 100)}
    )
    path = tmp_path / f"table{suffix}"
    frame.to_csv(path, index=False) if suffix == ".csv" else frame.to_parquet(path)
    data = load_dataset("csv", None, TableOptions(table=path, label_column="outcome", classes=("yes", "no", "maybe")))
    assert data.num_classes == 3 and data.class_names == ["yes", "no", "maybe"]  # the declared order
    assert len(data.y_train) == 80 and len(data.y_test) == 20 and data.input_shape == (2,)
    assert not data.public_test and data.private_rows == 100  # held out of the private column: private too
    names = np.array(["yes", "no", "maybe"])[np.concatenate([unseal(data.y_train), unseal(data.y_test)])]
    assert sorted(names) == sorted(frame["outcome"])
    with pytest.raises(ValueError, match="label column 'y' not found"):
        load_dataset("csv", None, TableOptions(table=path, label_column="y", classes=("yes", "no")))


def test_the_label_domain_is_declared_never_read_off_the_private_labels(tmp_path) -> None:
    """Replacing one training label by a value no other row has must not change the classes, K or
    the model's output size: without --classes a table is refused, and an undeclared value is an
    error before any release (today's loader counted the distinct labels, 2 -> 3)."""
    frame = pd.DataFrame({"a": np.arange(50.0), "label": [0, 1] * 25})
    frame.to_csv(tmp_path / "t.csv", index=False)
    with pytest.raises(ValueError, match="must be declared: --classes"):
        load_dataset("csv", None, TableOptions(table=tmp_path / "t.csv"))
    assert load_dataset("csv", None, TableOptions(table=tmp_path / "t.csv", classes=("0", "1", "2"))).num_classes == 3
    frame.loc[7, "label"] = 9
    frame.to_csv(tmp_path / "t.csv", index=False)
    with pytest.raises(ValueError, match=r"has labels missing or outside the declared classes \['0', '1'\]; declare"):
        load_dataset("csv", None, TableOptions(table=tmp_path / "t.csv", classes=("0", "1")), test_fraction=0.02)
    # values are matched as text: 1, 1.0 and true are one class
    frame = pd.DataFrame({"a": np.arange(4.0), "label": [1.0, 0.0, 1.0, 0.0]})
    frame.to_csv(tmp_path / "f.csv", index=False)
    data = load_dataset(
        "csv", None, TableOptions(table=tmp_path / "f.csv", classes=("false", "true")), test_fraction=0.5
    )
    assert sorted(np.concatenate([unseal(data.y_train), unseal(data.y_test)]).tolist()) == [0, 0, 1, 1]
    public = load_dataset(
        "csv",
        None,
        TableOptions(table=tmp_path / "f.csv", classes=("false", "true")),
        test_fraction=0.5,
        public_test=True,
    )
    assert public.public_test and public.y_test.tolist() == unseal(data.y_test).tolist()


def test_tables_as_they_come(tmp_path) -> None:
    """Categorical, boolean and numeric columns with missing values, a gzip CSV, explicit features and
    dropped columns, an id: encoded by the fitted preprocessing, which the dataset carries."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        {
            "id": np.arange(60),
            "age": rng.integers(18, 90, 60).astype(float),
            "job": rng.choice(["a", "b", None], 60),
            "member": rng.choice([True, False], 60),
            "spend": rng.random(60),
            "label": rng.choice(["no", "yes"], 60),
        }
    )
    frame.loc[3, "age"] = np.nan
    frame.to_csv(tmp_path / "t.csv.gz", index=False)
    data = load_dataset(
        "csv",
        None,
        TableOptions(
            table=tmp_path / "t.csv.gz", label_column="label", classes=("no", "yes"), drop=("spend",), id_column="id"
        ),
    )
    names = data.preprocessor.encoded_names
    assert "spend" not in " ".join(names) and "id" not in names and any(n.startswith("job_") for n in names)
    assert any("missingindicator" in n for n in names) and np.isfinite(data.x_train).all()
    only = load_dataset(
        "csv",
        None,
        TableOptions(table=tmp_path / "t.csv.gz", label_column="label", classes=("no", "yes"), features=("age",)),
    )
    assert only.input_shape == (2,)  # age and its missing indicator
    with pytest.raises(ValueError, match=r"columns \['salary'\] are not in the table"):
        load_dataset(
            "csv",
            None,
            TableOptions(table=tmp_path / "t.csv.gz", label_column="label", classes=("no", "yes"), drop=("salary",)),
        )


def test_regression_table(tmp_path) -> None:
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        {
            "a": rng.normal(size=50),
            "channel": rng.choice(["web", "mail", "phone"], 50),
            "id": np.arange(50),
            "spend": rng.uniform(-5, 120, 50),
        }
    )
    frame.to_csv(tmp_path / "t.csv", index=False)
    data = load_dataset(
        "csv",
        None,
        TableOptions(
            table=tmp_path / "t.csv", label_column="spend", label_range=(0, 100), label_grid=11, id_column="id"
        ),
        public_test=True,
    )
    assert data.x_train.shape[1] == 1 + 3 and data.preprocessor is not None  # categories one-hot, the id left out
    assert data.is_regression and np.array_equal(data.label_values, np.arange(0, 101, 10.0))
    assert np.isin(data.test_values, frame["spend"].to_numpy()).all()  # the raw values, not clipped or snapped
    assert np.array_equal(data.y_test, snap_to_grid(data.test_values, data.label_values))
    with pytest.raises(ConfigError, match="not both"):
        load_dataset(
            "csv",
            None,
            TableOptions(table=tmp_path / "t.csv", label_column="spend", label_range=(0, 1), classes=("0", "1")),
        )
    with pytest.raises(ConfigError, match="needs --label-range"):
        load_dataset("csv", None, TableOptions(table=tmp_path / "t.csv", label_column="spend", label_grid=5))
    with pytest.raises(ConfigError, match="defines its own labels"):
        load_dataset("digits", None, TableOptions(label_range=(0, 1)))


def test_a_missing_label_column_advises_label_column_not_classes(tmp_path, capsys) -> None:
    pd.DataFrame({"a": [1.0, 2.0], "converted": [0, 1]}).to_csv(tmp_path / "t.csv", index=False)
    argv = ["train", "--dataset", "csv", "--table", str(tmp_path / "t.csv"), "--method", "lp-1st", "--epsilon", "1"]
    assert main([*argv, "--out", str(tmp_path / "run"), "--quiet"]) == 2
    error = capsys.readouterr().err
    assert "label column 'label' not found" in error and "--label-column" in error and "--classes" not in error
    assert "'converted'" in error


def test_a_test_share_that_leaves_no_training_row_is_a_clear_error(tmp_path) -> None:
    from labeldp.data import load_dataset
    from labeldp.errors import DataError
    from tests.helpers import write_movielens

    pd.DataFrame({"a": [1.0], "label": [0]}).to_csv(tmp_path / "one.csv", index=False)
    with pytest.raises(DataError, match="leaves none to train on"):
        load_dataset("csv", None, TableOptions(table=tmp_path / "one.csv", classes=("0", "1")))
    write_movielens(tmp_path / "ml", ratings=1)
    with pytest.raises(DataError, match="leaves none to train on"):
        load_dataset("movielens", tmp_path / "ml")


def _users_frame(labels=None) -> pd.DataFrame:
    """60 users of 1 to 6 rows (210 rows), a feature and a label."""
    users = np.repeat([f"user{i}" for i in range(60)], np.arange(60) % 6 + 1)
    rng = np.random.default_rng(1)
    return pd.DataFrame(
        {
            "user": users,
            "x": rng.normal(size=users.size),
            "label": rng.integers(0, 2, users.size) if labels is None else labels,
        }
    )


def test_a_privacy_unit_keeps_at_most_m_rows_per_unit_and_holds_out_whole_units(tmp_path) -> None:
    """The unit column is never a feature; at most M rows of a unit are kept, the same rows whatever the
    labels; the test rows are whole units, none of them with training rows; the dataset's units cover the
    training rows then the private test rows."""
    from labeldp.data.table import load_table_dataset

    frame = _users_frame()
    frame.to_csv(tmp_path / "t.csv", index=False)
    options = TableOptions(tmp_path / "t.csv", classes=("0", "1"), privacy_unit="user", max_rows_per_unit=3)
    data = load_table_dataset(options, seed=2)
    assert data.preprocessor.features == ["x"]
    kept = sum(min(3, k % 6 + 1) for k in range(60))
    assert data.unit_bound == {
        "column": "user",
        "max_rows": 3,
        "units": 60,
        "rows_read": 210,
        "rows_kept": kept,
        "most_rows": 3,
    }
    assert data.private_rows == kept and np.bincount(data.units).max() == 3 and data.units.max() == 59
    train, test = set(data.units[: len(data.y_train)]), set(data.units[len(data.y_train) :])
    assert not train & test and len(test) == 12  # a fifth of the units
    flipped = _users_frame(1 - frame["label"])
    flipped.to_csv(tmp_path / "flipped.csv", index=False)
    other = load_table_dataset(dataclasses.replace(options, table=tmp_path / "flipped.csv"), seed=2)
    assert np.array_equal(other.x_train, data.x_train) and np.array_equal(other.x_test, data.x_test)
    public = load_table_dataset(options, seed=2, public_test=True)
    assert public.public_test and public.units.shape == (len(public.y_train),)
    frame.drop(columns="user").to_csv(tmp_path / "test.csv", index=False)  # a public test table needs no unit
    separate = load_table_dataset(dataclasses.replace(options, test_table=tmp_path / "test.csv"), seed=2)
    assert len(separate.y_test) == 210 and len(separate.y_train) == kept and separate.units.size == kept


def test_a_privacy_unit_is_refused_as_a_feature_and_without_its_bound(tmp_path) -> None:
    from labeldp.data.table import load_table_dataset
    from labeldp.errors import DataError

    frame = _users_frame()
    frame.to_csv(tmp_path / "t.csv", index=False)
    with pytest.raises(ConfigError, match="privacy unit column cannot be a feature"):
        load_table_dataset(
            TableOptions(
                table=tmp_path / "t.csv",
                label_column="label",
                classes=("0", "1"),
                features=("x", "user"),
                privacy_unit="user",
            )
        )
    with pytest.raises(ConfigError, match="max_rows_per_unit"):
        load_table_dataset(
            TableOptions(table=tmp_path / "t.csv", label_column="label", classes=("0", "1"), privacy_unit="user")
        )
    frame.assign(user=frame["user"].where(frame.index != 5)).to_csv(tmp_path / "gap.csv", index=False)
    with pytest.raises(DataError, match="every row needs its unit"):
        load_table_dataset(
            TableOptions(
                table=tmp_path / "gap.csv",
                label_column="label",
                classes=("0", "1"),
                privacy_unit="user",
                max_rows_per_unit=2,
            )
        )
    frame.assign(user="one").to_csv(tmp_path / "one.csv", index=False)
    with pytest.raises(DataError, match="1 privacy unit\\(s\\).*leaves none to train on"):
        load_table_dataset(
            TableOptions(
                table=tmp_path / "one.csv",
                label_column="label",
                classes=("0", "1"),
                privacy_unit="user",
                max_rows_per_unit=2,
            )
        )
