"""One reader for the label, id and unit columns on every route (train's loader, privatize, the
estimators' labels), each row released once, and labels that stay in their process."""

from __future__ import annotations

import multiprocessing
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pandas as pd
import pytest

from labeldp.boundary import load_release, privatize_table, unseal
from labeldp.boundary.units import unit_codes
from labeldp.cli import main
from labeldp.data import TableOptions
from labeldp.data.table import load_table_dataset
from labeldp.errors import DataError
from labeldp.randomness import NoiseSource

SEED = NoiseSource(insecure_seed=3)


def _users(rows: int, users: int, odd_row: int | None) -> pd.DataFrame:
    """``rows`` rows of ``users`` numeric user ids, one row's user ``anonymous`` (pandas then reads a
    large CSV's column in blocks of different types: ``17`` in some, ``"17"`` in others)."""
    rng = np.random.default_rng(0)
    user = rng.permutation(np.arange(rows) % users).astype(object)  # every user has rows
    if odd_row is not None:
        user[odd_row] = "anonymous"
    return pd.DataFrame({"x": rng.normal(size=rows).round(3), "user": user, "y": rng.integers(0, 2, rows)})


def test_mixed_type_user_ids_are_one_unit_each_in_train_and_privatize(tmp_path) -> None:
    """400,000 rows, 50,000 numeric users and one ``anonymous`` at row 300,000: 50,001 units, at most 4
    rows each, in train's loader and in privatize alike (train counted 84,465 units before)."""
    frame = _users(400_000, 50_000, 300_000)
    frame.to_csv(tmp_path / "t.csv", index=False)
    data = load_table_dataset(
        TableOptions(
            table=tmp_path / "t.csv", label_column="y", classes=("0", "1"), privacy_unit="user", max_rows_per_unit=4
        ),
        public_test=True,
    )
    assert data.unit_bound["units"] == 50_001 and data.unit_bound["most_rows"] == 4
    assert np.bincount(data.units).max() == 4
    sidecar = privatize_table(
        tmp_path / "t.csv",
        tmp_path / "out",
        label_column="y",
        classes=[0, 1],
        epsilon=1.0,
        unit_column="user",
        max_rows_per_unit=4,
        noise=SEED,
    )
    assert sidecar["privacy_unit"]["units"] == 50_001 and sidecar["privacy_unit"]["most_rows"] <= 4


def test_a_user_is_one_unit_across_a_parquet_and_a_csv_file(tmp_path) -> None:
    """User 17 written as an integer in Parquet and as text in CSV is one unit, in both routes."""
    frame = _users(2_000, 100, None)
    folder = tmp_path / "events"
    folder.mkdir()
    frame.iloc[:1000].assign(user=frame["user"].iloc[:1000].astype(np.int64)).to_parquet(folder / "a.parquet")
    spaced = frame["user"].iloc[1000:].map(lambda u: f" {u}")
    frame.iloc[1000:].assign(user=spaced).to_csv(folder / "b.csv", index=False)
    truth = frame["user"].nunique()
    data = load_table_dataset(
        TableOptions(table=folder, label_column="y", classes=("0", "1"), privacy_unit="user", max_rows_per_unit=100)
    )
    assert data.unit_bound["units"] == truth and data.unit_bound["rows_kept"] == 2_000
    sidecar = privatize_table(
        folder, tmp_path / "out", label_column="y", classes=[0, 1], epsilon=1.0, unit_column="user",
        max_rows_per_unit=100, noise=SEED,
    )  # fmt: skip
    assert sidecar["privacy_unit"]["units"] == truth
    assert unit_codes(pd.Series([17, "17", 17.0, " 17", "anonymous"], dtype=object)).tolist() == [0, 0, 0, 0, 1]


def test_a_file_beside_its_copy_in_another_format_is_refused_without_ids(tmp_path, capsys) -> None:
    """A folder holding events.csv beside events.parquet released each person twice under one ledger
    entry; without an id column it is refused unless the user states one row per person, and with ids
    the duplicate is named. A single file is never refused for rows with equal public columns."""
    frame = pd.DataFrame({"id": np.arange(200), "x": np.zeros(200), "y": np.arange(200) % 2})
    folder = tmp_path / "events"
    folder.mkdir()
    frame.to_csv(folder / "events.csv", index=False)
    frame.to_parquet(folder / "events.parquet")
    argv = ["privatize", "--table", str(folder), "--label-column", "y", "--classes", "0", "1", "--epsilon", "1"]
    assert main([*argv, "--out", str(tmp_path / "r1")]) == 2
    assert "2 data files and no id column" in capsys.readouterr().err and not (tmp_path / "r1").exists()
    assert main([*argv, "--id-column", "id", "--out", str(tmp_path / "r2")]) == 2
    assert "duplicated values ('0' at least twice)" in capsys.readouterr().err and not (tmp_path / "r2").exists()
    with pytest.raises(DataError, match="no id column"):
        load_table_dataset(TableOptions(table=folder, label_column="y", classes=("0", "1")))
    assert main([*argv, "--one-row-per-person", "--insecure-noise-seed", "1", "--out", str(tmp_path / "r3")]) == 0
    assert load_release(tmp_path / "r3").labels.size == 400
    frame.drop(columns="id").to_csv(tmp_path / "same.csv", index=False)  # equal public columns: not refused
    assert (
        len(load_table_dataset(TableOptions(table=tmp_path / "same.csv", label_column="y", classes=("0", "1"))).y_train)
        == 160
    )


def test_train_refuses_a_table_appended_to_itself_when_ids_are_named(tmp_path, capsys) -> None:
    frame = pd.DataFrame({"id": np.arange(300), "x": np.arange(300.0), "y": np.arange(300) % 2})
    pd.concat([frame, frame]).to_csv(tmp_path / "twice.csv", index=False)
    argv = ["train", "--dataset", "csv", "--table", str(tmp_path / "twice.csv"), "--label-column", "y"]
    argv += ["--classes", "0", "1", "--id-column", "id", "--method", "lp-1st", "--epsilon", "1"]
    assert main([*argv, "--out", str(tmp_path / "run"), "--quiet"]) == 2
    assert "id column 'id' has duplicated values ('0' at least twice)" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(("classes", "odd"), [(("0", "1", "refused"), "refused"), (("iOS", "Android", "None"), "None")])
def test_neighbours_differing_in_a_label_of_another_type_read_alike(tmp_path, classes, odd) -> None:
    """One label of another type (``refused`` among numbers) or a missing-value spelling (``None``):
    pandas warned about mixed types for one neighbour, or failed for one; the reader reads both alike,
    with no warning, and the labels are right."""
    rows = 400_000
    base = np.array(classes[:2], dtype=object)[np.arange(rows) % 2]
    outcomes = []
    for name, labels in (("d", base), ("d2", np.where(np.arange(rows) == 300_000, odd, base))):
        pd.DataFrame({"x": np.arange(rows) % 7, "answer": labels}).to_csv(tmp_path / f"{name}.csv", index=False)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            data = load_table_dataset(
                TableOptions(table=tmp_path / f"{name}.csv", label_column="answer", classes=classes),
                public_test=True,
            )
        outcomes.append([str(w.message) for w in caught])
        positions = np.concatenate([unseal(data.y_train), data.y_test])
        assert np.bincount(positions, minlength=3).sum() == rows
    assert outcomes == [[], []]


def _fit(epsilon: float) -> int:
    return _ESTIMATOR(epsilon).fit(_X, _Y).classes_.size


_X = np.random.default_rng(0).normal(size=(300, 3))
_Y = None
_ESTIMATOR = None


def test_labels_in_a_forked_worker_are_refused_and_nothing_is_spent() -> None:
    """PrivateLabels with a budget as a module global, four fits in a forked pool: each worker's
    release is refused (it would have a budget of its own), the parent sees the error, nothing was
    spent; the parent's own fit then spends as usual."""
    global _Y, _ESTIMATOR
    from sklearn.linear_model import LogisticRegression

    from labeldp import LabelBudget, LabelDPClassifier, PrivateLabels
    from labeldp.boundary import LabelsInAnotherProcessError

    _Y = PrivateLabels((_X[:, 0] > 0).astype(int), classes=[0, 1], budget=LabelBudget(1.0))
    _ESTIMATOR = lambda epsilon: LabelDPClassifier(LogisticRegression(), epsilon=epsilon)  # noqa: E731
    with multiprocessing.get_context("fork").Pool(2) as pool:
        with pytest.raises(LabelsInAnotherProcessError, match="without pickling"):
            pool.map(_fit, [0.3, 0.4, 0.5, 0.6])
    assert _Y.budget.spent == 0 and not _Y.ledger.entries
    assert _fit(0.5) == 2 and _Y.budget.spent == pytest.approx(0.5, abs=1e-3)


def test_labels_in_a_spawned_process_cannot_arrive() -> None:
    """A spawned process receives its arguments pickled, which private labels refuse."""
    script = textwrap.dedent("""
        import multiprocessing, numpy as np
        from labeldp import PrivateLabels, PrivateLabelAccessError
        def size(labels):
            return len(labels)
        if __name__ == "__main__":
            y = PrivateLabels(np.arange(10) % 2, classes=[0, 1])
            with multiprocessing.get_context("spawn").Pool(1) as pool:
                try:
                    pool.map(size, [y])
                except PrivateLabelAccessError:
                    print("refused")
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.stdout.strip() == "refused", result.stderr
