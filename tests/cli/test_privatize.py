"""`labeldp privatize` (cli/privatize.py): a CSV survey's label column released by RR-with-prior, a
second release into the same folder refused, the secure generator on request, and a release per user."""

from __future__ import annotations

import numpy as np
import pandas as pd

from labeldp.boundary import load_release, read_sidecar
from labeldp.cli import main


def test_cli_privatize(tmp_path, capsys) -> None:
    frame = pd.DataFrame(
        {
            "user": np.arange(400),
            "answer": np.tile(["yes", "no"], 200),
            "p_yes": np.full(400, 0.6),
            "p_no": np.full(400, 0.4),
        }
    )
    frame.to_csv(tmp_path / "survey.csv", index=False)
    command = [
        "privatize",
        "--table",
        str(tmp_path / "survey.csv"),
        "--label-column",
        "answer",
        "--id-column",
        "user",
        "--classes",
        "yes",
        "no",
        "--epsilon",
        "1",
        "--prior-columns",
        "p_yes",
        "p_no",
        "--out",
        str(tmp_path / "release"),
        "--insecure-noise-seed",
        "3",
    ]
    assert main(command) == 0
    printed = capsys.readouterr().out
    assert "released 400 labels of 'answer' by RR-with-prior" in printed and "NOT PRIVATE" in printed
    release = load_release(tmp_path / "release")
    assert release.classes == ("yes", "no") and release.prior_columns == ("p_yes", "p_no")
    assert main(command) == 2
    assert "already exists" in capsys.readouterr().err
    assert main(command[:-4] + ["--secure-rng", "--out", str(tmp_path / "secure")]) == 0
    assert read_sidecar(tmp_path / "secure")["noise"]["secure"]


def test_privatize_without_an_id_column_writes_each_rows_position(tmp_path, capsys) -> None:
    import pyarrow.parquet as pq

    frame = pd.DataFrame({"user": [5, 5, 7, 8], "answer": ["yes", "no", "no", "yes"]})
    frame.to_csv(tmp_path / "survey.csv", index=False)
    argv = ["privatize", "--table", str(tmp_path / "survey.csv"), "--label-column", "answer"]
    argv += ["--classes", "yes", "no", "--epsilon", "1", "--batch-rows", "3"]
    assert main([*argv, "--out", str(tmp_path / "release")]) == 0
    labels = pq.read_table(tmp_path / "release" / "labels.parquet").to_pandas()
    assert list(labels.columns) == ["row", "released_label"] and labels["row"].tolist() == [0, 1, 2, 3]
    assert "labels.parquet (row, released_label)" in capsys.readouterr().out
    assert main([*argv, "--id-column", "user", "--out", str(tmp_path / "by-user")]) == 2  # a duplicated id
    assert "user" in capsys.readouterr().err and not (tmp_path / "by-user").exists()


def test_privatize_per_user_says_the_rows_kept_and_both_epsilons(tmp_path, capsys) -> None:
    import pyarrow.parquet as pq

    frame = pd.DataFrame({"user": np.repeat(["ann", "bo", "cy"], [6, 3, 1]), "answer": np.tile(["yes", "no"], 5)})
    frame.to_csv(tmp_path / "survey.csv", index=False)
    argv = ["privatize", "--table", str(tmp_path / "survey.csv"), "--label-column", "answer"]
    argv += ["--classes", "yes", "no", "--epsilon", "2", "--privacy-unit", "user", "--out", str(tmp_path / "r")]
    assert main(argv) == 2 and "max_rows_per_unit" in capsys.readouterr().err
    assert main([*argv, "--max-rows-per-unit", "2"]) == 0
    printed = capsys.readouterr().out
    assert "privacy unit 'user': 3 units, at most 2 rows each" in printed and "5 of 10 rows kept" in printed
    assert "each unit's labels at epsilon 2 together, each label at 1 (epsilon / 2)" in printed
    rows = pq.read_table(tmp_path / "r" / "labels.parquet").column("row").to_numpy()
    assert np.bincount(np.searchsorted(["ann", "bo", "cy"], frame["user"].to_numpy()[rows])).tolist() == [2, 2, 1]
    sidecar = read_sidecar(tmp_path / "r")
    assert sidecar["epsilon"] == 1.0 and sidecar["privacy_unit"]["epsilon"] == 2.0
