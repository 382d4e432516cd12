"""`labeldp predict` (cli/predict.py, with runs/predictor.py): a model trained on a table scores new
rows of it, written beside their ids."""

from __future__ import annotations

import numpy as np
import pandas as pd

from labeldp.cli import main
from tests.helpers import write_table


def test_train_then_predict_new_rows_of_a_table(tmp_path, capsys) -> None:

    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"id": np.arange(200), "x": rng.normal(size=200), "kind": rng.choice(["a", "b"], 200)})
    frame["label"] = np.where(frame["x"] > 0, "high", "low")
    frame.to_csv(tmp_path / "t.csv", index=False)
    assert (
        main(
            [
                "train",
                "--dataset",
                "csv",
                "--table",
                str(tmp_path / "t.csv"),
                "--classes",
                "low",
                "high",
                "--id-column",
                "id",
                "--method",
                "lp-1st",
                "--epsilon",
                "4",
                "--epochs",
                "5",
                "--out",
                str(tmp_path / "run"),
            ]
        )
        == 0
    )
    said = "recipe: none (no tuned recipe for lp-1st on csv: the library's defaults); with your --epochs"
    assert said in capsys.readouterr().out
    frame.drop(columns="label").head(5).to_parquet(tmp_path / "new.parquet")
    assert (
        main(
            [
                "predict",
                str(tmp_path / "run"),
                "--table",
                str(tmp_path / "new.parquet"),
                "--out",
                str(tmp_path / "scores.csv"),
                "--id-column",
                "id",
            ]
        )
        == 0
    )
    scores = pd.read_csv(tmp_path / "scores.csv")
    assert list(scores.columns) == ["id", "p_low", "p_high", "predicted"] and len(scores) == 5


def test_predict_on_a_run_that_is_no_tables_answers_in_the_command_lines_words(tmp_path, capsys) -> None:
    run = str(tmp_path / "run")
    assert main(["train", "--method", "lp-1st", "--epsilon", "1", "--epochs", "1", "--quiet", "--out", run]) == 0
    write_table(tmp_path / "t.csv")
    capsys.readouterr()
    assert main(["predict", run, "--table", str(tmp_path / "t.csv"), "--out", str(tmp_path / "s.csv")]) == 2
    error = capsys.readouterr().err
    assert "`labeldp predict` scores the rows of a table" in error and "trained on digits" in error
    assert "give its inputs as an array" not in error and not (tmp_path / "s.csv").exists()
