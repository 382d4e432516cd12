"""The ledger of a dataset across runs (accounting/datasets.py): one key for neighbouring tables, runs
composed, a total enforced before anything is drawn, appends safe under concurrency and SIGKILL."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pytest

from labeldp.accounting.datasets import DatasetLedger, Spend, compose, ledgers
from labeldp.cli import main
from labeldp.data import TableOptions
from labeldp.data.table import load_table_dataset
from labeldp.runs.context import dataset_ledger


def _table(path, labels=None) -> None:
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"id": np.arange(300), "x": rng.normal(size=300), "y": rng.integers(0, 2, 300)})
    if labels is not None:
        frame["y"] = labels
    frame.to_csv(path, index=False)


def test_neighbouring_tables_have_one_key_and_one_ledger_file(tmp_path) -> None:
    """Same inputs, one label changed (to another class): the same key, the same file, from train's
    loader and from privatize alike."""
    _table(tmp_path / "d.csv")
    labels = pd.read_csv(tmp_path / "d.csv")["y"].to_numpy().copy()
    labels[17] = 1 - labels[17]
    (tmp_path / "n").mkdir()
    _table(tmp_path / "n" / "d.csv", labels)
    keys = []
    for path in (tmp_path / "d.csv", tmp_path / "n" / "d.csv"):
        for ids in (None, "id"):
            data = load_table_dataset(TableOptions(table=path, label_column="y", classes=("0", "1"), id_column=ids))
            keys.append((ids, dataset_ledger(data).key, dataset_ledger(data).path))
    assert len({key[1:] for key in keys}) == 1  # naming an id column or not changes nothing
    argv = ["privatize", "--table", str(tmp_path / "d.csv"), "--label-column", "y", "--classes", "0", "1"]
    assert main([*argv, "--id-column", "id", "--epsilon", "1", "--out", str(tmp_path / "r")]) == 0
    assert [ledger.key for ledger in ledgers()] == [keys[0][1]]  # privatize's key is train's


def test_a_sweep_of_seeds_composes_and_a_later_run_is_refused_past_the_total(tmp_path, capsys) -> None:
    """Three seeds at epsilon 1 on one table: each run says 1, the dataset 3; a train afterwards shows 4;
    with --total-epsilon 3.5 the next is refused before any draw (no run folder, the ledger unchanged),
    also from another process."""
    _table(tmp_path / "t.csv")
    grid = ["dataset=csv", f"table={tmp_path / 't.csv'}", "label_column=y", "classes=0:1", "method=lp-1st"]
    grid += ["epsilon=1", "epochs=1", "seed=0,1,2"]
    assert main(["sweep", "--grid", *grid, "--quiet", "--threads", "1", "--out", str(tmp_path / "s")]) == 0
    out = capsys.readouterr().out
    results = pd.read_csv(tmp_path / "s" / "results.csv")
    assert results["epsilon"].tolist() == [1.0, 1.0, 1.0] and results["dataset_epsilon"].tolist() == [3.0] * 3
    assert "epsilon 3 per row spent in all by 3 releases, composed" in out
    train = ["train", "--dataset", "csv", "--table", str(tmp_path / "t.csv"), "--label-column", "y"]
    train += ["--classes", "0", "1", "--method", "lp-1st", "--epsilon", "1", "--epochs", "1", "--tune-budget", "0"]
    assert main([*train, "--quiet", "--out", str(tmp_path / "fourth")]) == 0
    captured = capsys.readouterr()
    assert "epsilon 3 spent already on it; this run takes it to 4" in captured.err
    assert "epsilon 4 per row spent in all (4 releases, composed" in captured.out
    (ledger,) = ledgers()
    before = ledger.path.read_bytes()
    assert main([*train, "--total-epsilon", "3.5", "--out", str(tmp_path / "fifth")]) == 2
    assert "past --total-epsilon 3.5: refused before anything was drawn" in capsys.readouterr().err
    assert not (tmp_path / "fifth").exists() and ledger.path.read_bytes() == before
    command = [sys.executable, "-m", "labeldp", *train, "--total-epsilon", "3.5", "--out", str(tmp_path / "sixth")]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert result.returncode == 2 and "refused before anything was drawn" in result.stderr
    assert not (tmp_path / "sixth").exists() and ledger.path.read_bytes() == before
    assert main([*train, "--total-epsilon", "3.5", "--quiet", "--out", str(tmp_path / "fourth")]) == 0  # resumes
    assert main(["budget"]) == 0 and "epsilon 4 per row  4 releases (train)" in capsys.readouterr().out


def test_composition_adds_pure_releases_exactly_and_composes_deltas() -> None:
    pure = [Spend(f"r{i}", "train", 1.0, 0.0, None, 1.0) for i in range(3)]
    assert compose(pure) == (3.0, 0.0, None)
    approximate = compose([Spend("a", "train", 1.0, 1e-5, None, 1.0), Spend("b", "train", 1.0, 1e-5, None, 1.0)])
    assert approximate[1] == 2e-5 and 1.5 < approximate[0] <= 2.0
    per_user = compose([Spend("a", "train", 1.0, 0.0, "user", 0.25), Spend("b", "train", 2.0, 0.0, "user", 0.5)])
    assert per_user == (3.0, 0.0, "user")
    mixed = compose([Spend("a", "train", 1.0, 0.0, "user", 0.25), Spend("b", "train", 2.0, 0.0, None, 2.0)])
    assert mixed == (2.25, 0.0, None)  # per row, where the releases protect different units


_WRITER = textwrap.dedent("""
    import sys
    from labeldp.accounting.datasets import DatasetLedger, Spend
    ledger = DatasetLedger("shared", "a table", sys.argv[1])
    for i in range(100):
        ledger.record(Spend(f"{sys.argv[2]}-{i}", "train", 0.01, 0.0, None, 0.01))
        print(i, flush=True)
""")


def test_two_writers_at_once_one_killed_midway_lose_no_completed_release(tmp_path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(tmp_path), name], stdout=subprocess.PIPE, text=True, env=env
        )
        for name in ("a", "b")
    ]
    completed = -1
    for line in writers[1].stdout:  # b is killed after its 50th release is on the ledger
        completed = int(line)
        if completed == 49:
            writers[1].send_signal(signal.SIGKILL)
            break
    writers[1].wait()
    assert writers[0].wait(timeout=120) == 0
    ledger = DatasetLedger("shared", "a table", tmp_path)
    names = {spend.release for spend in ledger.spends()}
    assert {f"a-{i}" for i in range(100)} <= names and {f"b-{i}" for i in range(50)} <= names
    for line in ledger.path.read_text().splitlines():
        json.loads(line)  # every line parses
    # a line cut short by a kill is skipped, and cut off by the next writer
    with open(ledger.path, "a") as handle:
        handle.write('{"release": "half')
    assert len(ledger.spends()) == len(names)
    ledger.record(Spend("after", "train", 0.01, 0.0, None, 0.01))
    assert all(json.loads(line) for line in ledger.path.read_text().splitlines())
    assert len(ledger.spends()) == len(names) + 1


def test_private_labels_of_one_named_dataset_share_its_ledger(monkeypatch) -> None:
    """A notebook cell run twice makes two sets of the same labels: named, they compose on one ledger,
    and a total refuses the fit that would pass it before anything is drawn."""
    from sklearn.linear_model import LogisticRegression

    from labeldp import LabelDPClassifier, PrivateLabels
    from labeldp.errors import BudgetError

    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 2))
    y = (X[:, 0] > 0).astype(int)
    for _ in range(2):  # the cell, run twice
        LabelDPClassifier(LogisticRegression(), epsilon=1.0).fit(X, PrivateLabels(y, [0, 1], dataset="survey"))
    (ledger,) = ledgers()
    assert ledger.key == "survey" and ledger.composed() == (2.0, 0.0, None)
    monkeypatch.setenv("LABELDP_TOTAL_EPSILON", "2.5")
    labels = PrivateLabels(y, [0, 1], dataset="survey")
    with pytest.raises(BudgetError, match="past --total-epsilon 2.5"):
        LabelDPClassifier(LogisticRegression(), epsilon=1.0).fit(X, labels)
    assert not labels.ledger.entries and len(ledger.spends()) == 2


def test_folders_written_before_the_ledgers_are_imported_once(tmp_path, monkeypatch, capsys) -> None:
    """A run and a release folder made while the budget folder was elsewhere (as before the ledgers
    existed): not counted until imported, and counted once however often they are imported."""
    _table(tmp_path / "t.csv")
    monkeypatch.setenv("LABELDP_BUDGET_DIR", str(tmp_path / "elsewhere"))
    train = ["train", "--dataset", "csv", "--table", str(tmp_path / "t.csv"), "--label-column", "y", "--classes"]
    train += ["0", "1", "--method", "lp-1st", "--epsilon", "1", "--epochs", "1", "--tune-budget", "0", "--quiet"]
    assert main([*train, "--out", str(tmp_path / "old" / "run")]) == 0
    privatize = ["privatize", "--table", str(tmp_path / "t.csv"), "--label-column", "y", "--classes", "0", "1"]
    assert main([*privatize, "--epsilon", "0.5", "--out", str(tmp_path / "old" / "release")]) == 0
    budget = ["budget", "--budget-dir", str(tmp_path / "budget")]
    assert main(budget) == 0 and "no dataset has spent anything yet" in capsys.readouterr().out
    for _ in range(2):
        assert main([*budget[:1], "import", str(tmp_path / "old"), *budget[1:]]) == 0
    out = capsys.readouterr().out
    assert "epsilon 1.5 per row  2 releases (privatize, train)" in out


def test_a_folder_made_again_under_the_same_path_is_a_new_release(tmp_path, capsys) -> None:
    """A release folder moved aside and a run folder deleted, then made again under the same path: each
    new draw adds to the dataset's ledger (the folder's id, not its path, names its line), and
    --total-epsilon sees them all; a train refused by it leaves no folder, its auto-tune's plan included."""
    _table(tmp_path / "t.csv")
    privatize = ["privatize", "--table", str(tmp_path / "t.csv"), "--label-column", "y", "--classes", "0", "1"]
    privatize += ["--epsilon", "1", "--out", str(tmp_path / "rel")]
    assert main(privatize) == 0
    (tmp_path / "rel").rename(tmp_path / "rel-old")
    assert main(privatize) == 0
    train = ["train", "--dataset", "csv", "--table", str(tmp_path / "t.csv"), "--label-column", "y", "--classes"]
    train += [
        "0",
        "1",
        "--method",
        "lp-1st",
        "--epsilon",
        "1",
        "--epochs",
        "1",
        "--quiet",
        "--out",
        str(tmp_path / "run"),
    ]
    assert main([*train, "--tune-budget", "0"]) == 0
    shutil.rmtree(tmp_path / "run")
    assert main([*train, "--tune-budget", "0"]) == 0
    (ledger,) = ledgers()
    assert ledger.composed()[0] == 4.0 and len(ledger.spends()) == 4
    capsys.readouterr()
    assert main([*train[:-1], str(tmp_path / "fifth"), "--total-epsilon", "4.5"]) == 2  # with the auto-tune
    assert "refused before anything was drawn" in capsys.readouterr().err and not (tmp_path / "fifth").exists()
    assert ledger.composed()[0] == 4.0


def test_a_check_reserves_its_spend_so_that_two_at_once_see_each_other(tmp_path) -> None:
    from labeldp.errors import BudgetError

    ledger = DatasetLedger("t", "a table", tmp_path)
    ledger.check(Spend("a", "train", 1.0, 0.0, None, 1.0), total=1.5)  # reserved, not yet drawn
    with pytest.raises(BudgetError, match="has spent epsilon 1"):
        ledger.check(Spend("b", "train", 1.0, 0.0, None, 1.0), total=1.5)
    ledger.cancel("a")  # "a" failed before its draw
    ledger.check(Spend("b", "train", 1.0, 0.0, None, 1.0), total=1.5)
    assert ledger.composed()[0] == 1.0


def test_reservations_hold_until_a_run_finishes_and_a_withdrawal_changes_no_unit(tmp_path) -> None:
    """From a review: a run's line keeps its reserved spend between its releases (a check meanwhile sees
    the whole run); a withdrawn reservation neither counts nor turns a per-user ledger into a per-row one."""
    ledger = DatasetLedger("t", "a table", tmp_path)
    ledger.record(Spend("first", "privatize", 1.0, 0.0, "user", 0.2))
    ledger.check(Spend("failed", "privatize", 1.0, 0.0, "user", 0.2), total=None)
    ledger.cancel("failed")
    assert ledger.composed() == (1.0, 0.0, "user") and len(ledger.spends()) == 1
    ledger.check(Spend("run", "train", 1.0, 0.0, "user", 0.2), total=None)
    ledger.record(Spend("run", "train", 0.3, 0.0, "user", 0.06), final=False)  # its prior, drawn first
    assert ledger.composed()[0] == 2.0
    ledger.record(Spend("run", "train", 0.9, 0.0, "user", 0.18))  # finished, below its plan
    assert ledger.composed()[0] == 1.9


def test_a_copied_folder_is_a_release_of_its_own_and_a_finished_one_reserves_nothing(tmp_path, capsys) -> None:
    _table(tmp_path / "t.csv")
    train = ["train", "--dataset", "csv", "--table", str(tmp_path / "t.csv"), "--label-column", "y", "--classes"]
    train += ["0", "1", "--method", "lp-1st", "--epochs", "1", "--tune-budget", "0", "--quiet", "--out"]
    assert main([*train, str(tmp_path / "a"), "--epsilon", "1"]) == 0
    (ledger,) = ledgers()
    before = ledger.path.read_bytes()
    assert main([*train, str(tmp_path / "a"), "--epsilon", "3"]) == 2  # a finished run of another configuration
    assert ledger.path.read_bytes() == before
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    (tmp_path / "b" / "summary.json").unlink()
    assert main([*train, str(tmp_path / "b"), "--epsilon", "1"]) == 0  # the copy trains again from its release
    assert len(ledger.spends()) == 2 and ledger.composed()[0] == 2.0  # counted again: never fewer


def test_the_released_type_follows_the_declared_classes_not_the_type_pandas_guessed(tmp_path) -> None:
    import pyarrow.parquet as pq

    from labeldp.boundary import privatize_table
    from labeldp.randomness import NoiseSource

    types = []
    for name, labels in (("ints", [1, 2, 1, 2]), ("floats", [1, 2, 1, 2.5])):
        frame = pd.DataFrame({"y": labels * 25})
        privatize_table(frame, tmp_path / name, label_column="y", classes=[1, 2, 2.5], epsilon=1.0,
                        noise=NoiseSource(insecure_seed=0))  # fmt: skip
        types.append(pq.read_schema(tmp_path / name / "labels.parquet").field("released_label").type)
    assert types[0] == types[1]
