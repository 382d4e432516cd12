"""`labeldp predict` (cli/predict.py, with runs/predict.py): a model trained on a table scores new
rows of it, written beside their ids."""

from __future__ import annotations

import numpy as np

from labeldp.cli import main


def test_train_then_predict_new_rows_of_a_table(tmp_path, capsys) -> None:
    import pandas as pd

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
    assert "no tuned recipe for lp-1st on csv: the library's defaults with --epochs" in capsys.readouterr().out
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
