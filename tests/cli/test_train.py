"""`labeldp train` (cli/train.py): bad arguments exit with a clear message before anything is
written, real runs on the digits (LP-2ST, DP-SGD) and on MovieLens and a regression table, a run
killed outright or interrupted by Ctrl-C resumes without spending again, and data paths are
recorded absolute."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest

from labeldp.accounting import PrivacyLedger
from labeldp.cli import main
from tests.helpers import make_mnist_folder, write_movielens, write_table


@pytest.mark.parametrize(
    "args, message",
    [
        (["--method", "lp-2st", "--epsilon", "0"], "epsilon must be a finite number > 0"),
        (["--method", "lp-2st", "--epsilon", "nan"], "epsilon must be a finite number > 0"),
        (["--method", "lp-2st"], "needs --epsilon"),
        (["--dataset", "mnist", "--data-dir", "/nonexistent/mnist", "--epsilon", "1"], "does not exist"),
        (["--dataset", "mnist", "--epsilon", "1"], "needs a data folder"),
        (["--dataset", "csv", "--epsilon", "1"], "needs a table file"),
        (["--method", "lp-1st", "--epsilon", "1", "--delta", "1e-5"], "delta applies only to methods pate and dp-sgd"),
        (["--method", "dp-sgd", "--epsilon", "1", "--delta", "0"], "delta must lie in (0, 1)"),
        (["--method", "dp-sgd", "--epsilon", "1", "--mixup", "1"], "cannot use mixup"),
        (
            ["--method", "dp-sgd", "--epsilon", "1", "--model", "resnet18", "--dataset", "digits"],
            "choose a --model without BatchNorm",
        ),
        (
            ["--method", "dp-sgd", "--epsilon", "1", "--model", "cnn-bn", "--dataset", "digits"],
            "e.g. cnn or tanh-cnn for 28x28 images",
        ),
        (["--method", "dp-sgd", "--epsilon", "1", "--temperature", "2"], "'dp-sgd' does not use temperature"),
        (["--method", "lp-2st", "--epsilon", "1", "--max-grad-norm", "2"], "does not use max_grad_norm"),
        (
            ["--profile", "digits/e1/lp-1st/run0", "--epochs", "5", "--no-augment"],
            "--epochs, --no-augment would not apply to it",
        ),
        (["--profile", "digits/e1/lp-1st/run0", "--tune-budget", "1"], "--tune-budget would not apply to it"),
        (["--method", "lp-1st", "--epsilon", "1", "--tune-budget", "-1"], "--tune-budget must be 0 (off) or positive"),
        (
            ["--data-dir", "/data/mnist", "--method", "lp-2st", "--epsilon", "1"],
            "dataset 'digits' is embedded: it takes no --data-dir",
        ),
        (
            ["--dataset", "mnist", "--data-dir", "/data/mnist", "--table", "t.csv", "--epsilon", "1"],
            "are for a table (dataset 'csv'), not 'mnist'",
        ),
    ],
)
def test_bad_arguments_exit_with_a_clear_message(tmp_path, capsys, args, message) -> None:
    assert main(["train", *args, "--out", str(tmp_path / "run"), "--quiet"]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "run" / "ledger.json").exists()


def test_dpsgd_on_digits(tmp_path, capsys) -> None:
    assert (
        main(
            [
                "train",
                "--dataset",
                "digits",
                "--method",
                "dp-sgd",
                "--epsilon",
                "3",
                "--model",
                "mlp",
                "--epochs",
                "1",
                "--batch-size",
                "64",
                "--out",
                str(tmp_path / "run"),
                "--quiet",
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "epsilon 3 per example (delta 1e-05, add-or-remove one example)" in printed
    # augmentation multiplicity needs augmentations; the digits have none
    assert (
        main(
            [
                "train",
                "--dataset",
                "digits",
                "--method",
                "dp-sgd",
                "--epsilon",
                "3",
                "--augmult",
                "2",
                "--out",
                str(tmp_path / "augmult"),
                "--quiet",
            ]
        )
        != 0
    )
    assert "augmentation is off" in capsys.readouterr().err  # the digits recipe turns it off: they have none
    assert not (tmp_path / "augmult" / "ledger.json").exists()


def test_train_on_digits(tmp_path, capsys) -> None:
    out = tmp_path / "run"
    assert (
        main(
            [
                "train",
                "--dataset",
                "digits",
                "--method",
                "lp-2st",
                "--epsilon",
                "4",
                "--epochs",
                "2",
                "--out",
                str(out),
                "--quiet",
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "test accuracy" in printed and "epsilon 4" in printed
    summary = json.loads((out / "summary.json").read_text())
    assert summary["method"] == "lp-2st" and summary["dataset"] == "digits"


def _wait_for(predicate, timeout: float) -> None:
    deadline = time.time() + timeout
    while not predicate():
        if time.time() > deadline:
            raise TimeoutError("condition not reached")
        time.sleep(0.02)


def test_killed_run_resumes_without_spending_again(tmp_path) -> None:
    # reproducible noise, so that the resumed run can be compared with an uninterrupted one
    args = [
        "train",
        "--dataset",
        "digits",
        "--method",
        "lp-2st",
        "--epsilon",
        "2",
        "--epochs",
        "8",
        "--batch-size",
        "32",
        "--threads",
        "1",
        "--quiet",
        "--insecure-noise-seed",
        "5",
    ]
    out = tmp_path / "killed"
    process = subprocess.Popen([sys.executable, "-m", "labeldp.cli", *args, "--out", str(out)])
    metrics = out / "metrics.jsonl"
    _wait_for(lambda: metrics.exists() and len(metrics.read_text().splitlines()) >= 3, timeout=120)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert not (out / "summary.json").exists(), "the run finished before it could be killed"
    ledger_before = PrivacyLedger.load(out / "ledger.json")
    with np.load(out / "noisy_labels" / "stage1.npz") as data:
        stage1_before = data["labels"].copy()

    assert main([*args, "--out", str(out)]) == 0  # resumed, in this process
    ledger_after = PrivacyLedger.load(out / "ledger.json")
    assert ledger_after.entries[0].event == ledger_before.entries[0].event
    assert np.array_equal(ledger_after.entries[0].members, ledger_before.entries[0].members)
    assert [e.tag for e in ledger_after.entries] == ["stage1", "stage2"]
    with np.load(out / "noisy_labels" / "stage1.npz") as data:
        assert np.array_equal(data["labels"], stage1_before)
    rows = [json.loads(line) for line in metrics.read_text().splitlines()]
    assert [(r["stage"], r["epoch"]) for r in rows] == [(s, e) for s in (1, 2) for e in range(1, 9)]

    # The resumed run ends exactly where an uninterrupted one does.
    assert main([*args, "--out", str(tmp_path / "straight")]) == 0
    final = json.loads((out / "summary.json").read_text())
    reference = json.loads((tmp_path / "straight" / "summary.json").read_text())
    assert final["test_accuracy"] == reference["test_accuracy"]
    assert final["epsilon"] == reference["epsilon"] == pytest.approx(2.0, abs=2e-4)


def test_ctrl_c_is_a_message_and_the_rerun_says_what_it_resumes(tmp_path, capsys, monkeypatch) -> None:
    import labeldp.runs.context as context

    args = ["train", "--method", "lp-2st", "--epsilon", "2", "--epochs", "2", "--out", str(tmp_path / "run")]
    real = context.train_stage
    calls = []

    def interrupted_in_stage_two(*a, **k):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*a, **k)

    monkeypatch.setattr(context, "train_stage", interrupted_in_stage_two)
    assert main(args) == 130
    error = capsys.readouterr().err
    assert "interrupted. Run the same command again" in error and "Traceback" not in error
    monkeypatch.undo()
    assert main(args) == 0
    printed = capsys.readouterr()
    assert (
        "the saved releases (stage1, stage2) are read back, no label is drawn again; training continues "
        "after stage 1 epoch 2"
    ) in printed.out + printed.err


def test_config_names_data_by_absolute_path(tmp_path, monkeypatch) -> None:
    import pandas as pd

    monkeypatch.chdir(tmp_path)
    pd.DataFrame({"a": np.arange(20.0), "label": [0, 1] * 10}).to_csv("t.csv", index=False)
    assert (
        main(
            [
                "train",
                "--dataset",
                "csv",
                "--table",
                "t.csv",
                "--classes",
                "0",
                "1",
                "--method",
                "lp-1st",
                "--epsilon",
                "1",
                "--epochs",
                "1",
                "--out",
                "run",
                "--quiet",
            ]
        )
        == 0
    )
    assert json.loads((tmp_path / "run" / "config.json").read_text())["table"] == str(tmp_path / "t.csv")


def test_cli_trains_on_movielens_and_a_regression_table(tmp_path, capsys) -> None:
    write_movielens(tmp_path / "ml", users=20, items=25, ratings=300)
    assert (
        main(
            [
                "train",
                "--dataset",
                "movielens",
                "--data-dir",
                str(tmp_path / "ml"),
                "--method",
                "rr-on-bins-mst",
                "--epsilon",
                "2",
                "--epochs",
                "2",
                "--validation",
                "0.2",
                "--quiet",
                "--insecure-noise-seed",
                "0",
                "--out",
                str(tmp_path / "run"),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "rr-on-bins-mst on movielens: test RMSE" in out and "epsilon 2" in out
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["label_range"] == [1.0, 5.0] and summary["label_grid"] == 5
    rng = np.random.default_rng(0)
    pd.DataFrame({"a": rng.normal(size=80), "spend": rng.uniform(0, 50, 80)}).to_csv(tmp_path / "t.csv", index=False)
    assert (
        main(
            [
                "train",
                "--dataset",
                "csv",
                "--table",
                str(tmp_path / "t.csv"),
                "--label-column",
                "spend",
                "--label-range",
                "0",
                "40",
                "--label-grid",
                "9",
                "--method",
                "laplace-regression",
                "--epsilon",
                "1",
                "--epochs",
                "1",
                "--quiet",
                "--out",
                str(tmp_path / "table"),
            ]
        )
        == 0
    )
    assert "laplace-regression on csv: test RMSE" in capsys.readouterr().out
    assert (
        main(
            [
                "predict",
                str(tmp_path / "table"),
                "--table",
                str(tmp_path / "t.csv"),
                "--out",
                str(tmp_path / "scores.csv"),
            ]
        )
        == 0
    )
    predicted = pd.read_csv(tmp_path / "scores.csv")["predicted"]
    assert len(predicted) == 80 and predicted.between(0, 40).all()  # expected values on the declared range
    assert (
        main(
            [
                "train",
                "--dataset",
                "csv",
                "--table",
                str(tmp_path / "t.csv"),
                "--label-column",
                "spend",
                "--label-range",
                "0",
                "--method",
                "rr-on-bins",
                "--epsilon",
                "1",
                "--out",
                str(tmp_path / "bad"),
            ]
        )
        == 2
    )
    assert "two numbers LOW HIGH" in capsys.readouterr().err


def test_a_table_run_shows_and_records_the_columns_it_trains_on(tmp_path, capsys) -> None:
    import json

    write_table(tmp_path / "t.csv", visit=np.zeros(60))
    argv = ["train", "--dataset", "csv", "--table", str(tmp_path / "t.csv"), "--classes", "0", "1"]
    argv += ["--method", "lp-1st", "--epsilon", "1", "--epochs", "1", "--drop", "b", "--out", str(tmp_path / "run")]
    assert main(argv) == 0
    assert "features (3): a, c, visit" in capsys.readouterr().out
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["features"] == ["a", "c", "visit"]


def test_train_per_user_says_the_rows_kept_and_spends_epsilon_per_user(tmp_path, capsys) -> None:
    """--privacy-unit user --max-rows-per-unit 2: the user column is no feature, the rows kept are said,
    every release gives a row epsilon / 2, the summary shows both epsilons, config.json records the
    options and a resumed run under another bound is refused; DP-SGD is refused before anything is written."""
    rng = np.random.default_rng(0)
    users = np.repeat(np.arange(40), np.arange(40) % 4 + 1)  # 100 rows, users of 1 to 4 rows
    x = rng.normal(size=users.size)
    pd.DataFrame({"user": users, "x": x, "label": (x > 0).astype(int)}).to_csv(tmp_path / "t.csv", index=False)
    argv = ["train", "--dataset", "csv", "--table", str(tmp_path / "t.csv"), "--classes", "0", "1"]
    argv += ["--method", "lp-1st", "--epsilon", "2", "--epochs", "1", "--privacy-unit", "user"]
    assert main([*argv, "--out", str(tmp_path / "refused")]) == 2
    assert "--max-rows-per-unit" in capsys.readouterr().err and not (tmp_path / "refused").exists()
    assert main([*argv, "--max-rows-per-unit", "2", "--out", str(tmp_path / "run")]) == 0
    printed = capsys.readouterr()
    output = printed.out + printed.err
    assert "features (1): x" in output
    assert "privacy unit 'user' (public, not a feature): 40 units, at most 2 rows each" in output
    assert "70 of 100 rows kept; each release gives a row epsilon / 2" in output
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["epsilon"] == pytest.approx(2.0, abs=1e-2)
    assert summary["privacy_units"] == {"units": 40, "most_rows": 2, "row_epsilon": pytest.approx(1.0, abs=1e-2)}
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    assert saved["privacy_unit"] == "user" and saved["max_rows_per_unit"] == 2
    assert json.loads((tmp_path / "run" / "data.json").read_text())["unit_bound"]["rows_kept"] == 70
    assert main([*argv, "--max-rows-per-unit", "3", "--out", str(tmp_path / "run")]) == 2
    assert "max_rows_per_unit" in capsys.readouterr().err
    dpsgd = [*argv[:8], "--method", "dp-sgd", "--epsilon", "2", "--epochs", "1", "--privacy-unit", "user"]
    assert main([*dpsgd, "--max-rows-per-unit", "2", "--out", str(tmp_path / "dpsgd")]) == 2
    assert "protects examples" in capsys.readouterr().err and not (tmp_path / "dpsgd").exists()


@pytest.mark.filterwarnings("ignore:.*match no published checksum")
def test_a_dataset_without_its_own_recipe_is_tuned_on_its_own_release(tmp_path, capsys) -> None:
    """A table (no recipe) and Fashion-MNIST (MNIST's recipe, borrowed) choose their learning rate on the
    run's own release and record it; the run's ledger is one run's. The digits (a recipe of their own)
    and --tune-budget 0 train as given, with no record."""
    write_table(tmp_path / "t.csv", rows=100)
    table = ["--dataset", "csv", "--table", str(tmp_path / "t.csv"), "--classes", "0", "1"]
    make_mnist_folder(tmp_path / "fashion", n_train=60, n_test=20)
    fashion = ["--dataset", "fashion-mnist", "--data-dir", str(tmp_path / "fashion")]
    common = ["train", "--method", "lp-1st", "--epsilon", "1", "--epochs", "1"]
    assert main([*common, *table, "--out", str(tmp_path / "table")]) == 0
    out = capsys.readouterr().out
    assert "auto-tune: 2 learning rates (0.05, 0.1)" in out and "auto-tune: chose lr=" in out
    summary = json.loads((tmp_path / "table" / "summary.json").read_text())
    assert summary["auto_tune"]["candidates"] == ["lr=0.05", "lr=0.1"] and summary["epsilon"] == 1.0
    from labeldp.runs import RunDirectory

    assert [entry.tag for entry in RunDirectory(tmp_path / "table").read_ledger().entries] == ["stage1", "test"]
    assert main([*common, *fashion, "--out", str(tmp_path / "fashion-run")]) == 0
    out = capsys.readouterr().out
    assert "recipe: mnist/lp-1st (mnist's, borrowed: fashion-mnist has none of its own" in out
    assert "auto-tune: chose" in out
    for run, argv in (("digits", []), ("off", [*table, "--tune-budget", "0"])):
        assert main([*common, *argv, "--out", str(tmp_path / run), "--quiet"]) == 0
        assert "auto_tune" not in json.loads((tmp_path / run / "summary.json").read_text())
        assert not (tmp_path / run / "auto_tune.json").exists() and not (tmp_path / run / "candidates").exists()


def test_a_table_run_started_under_the_earlier_default_method_finishes_under_it(tmp_path) -> None:
    """A folder whose run named no method when ``lp-2st`` was every dataset's default: the same command, which
    names none, finishes that run (``config.json``'s method) rather than refusing it as another configuration."""
    rng = np.random.default_rng(0)
    pd.DataFrame({"a": rng.normal(size=300), "y": rng.integers(0, 2, 300)}).to_csv(tmp_path / "t.csv", index=False)
    argv = ["train", "--dataset", "csv", "--table", str(tmp_path / "t.csv"), "--label-column", "y", "--classes"]
    argv += ["0", "1", "--epsilon", "1", "--epochs", "1", "--insecure-noise-seed", "3", "--quiet", "--out"]
    assert main([*argv, str(tmp_path / "run"), "--method", "lp-2st"]) == 0
    summary = (tmp_path / "run" / "summary.json").read_text()
    assert main([*argv, str(tmp_path / "run")]) == 0
    assert json.loads((tmp_path / "run" / "config.json").read_text())["method"] == "lp-2st"
    assert (tmp_path / "run" / "summary.json").read_text() == summary  # finished: nothing trained or drawn again
