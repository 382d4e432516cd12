"""`labeldp hashed` (cli/hashed.py): train a run folder per privacy unit, refuse a second release into it,
predict new rows with the run's hashing, take labels from a noisy source, and refuse flags that cannot
work together before anything is read."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from labeldp.cli import main
from tests.ads.conftest import SMALL, ads  # noqa: F401 (the fixture)


@pytest.fixture
def train_argv(ads, tmp_path) -> list[str]:  # noqa: F811
    return [
        "hashed", "train", "--table", str(ads[0]), "--label-column", "converted", "--classes", "0", "1",
        "--columns", "advertiser", "campaign", "site", "device", "--cross", "advertiser:site", "--bits", "8",
        "--slot-bits", "device=3", "--block-rows", "2048", "--insecure-noise-seed", "2",
    ]  # fmt: skip


def test_train_per_user_then_predict_with_the_runs_hashing(ads, train_argv, tmp_path, capsys) -> None:  # noqa: F811
    out = tmp_path / "run"
    argv = train_argv + ["--epsilon", "2", "--privacy-unit", "user_id", "--max-rows-per-unit", "3", "--out", str(out)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert (
        "counts route, lr" in printed
        and "epsilon 2 per user_id (0.667 per row; delta 0" in printed
        and "NOT PRIVATE" in printed
    )
    summary = json.loads((out / "summary.json").read_text())
    assert summary["epsilon_per_row"] == pytest.approx(2 / 3, abs=1e-2) and summary["max_rows_per_unit"] == 3
    assert main(argv) == 2
    assert "spend their budget a second time" in capsys.readouterr().err
    scores = tmp_path / "scores.parquet"
    command = ["hashed", "predict", "--run", str(out), "--table", str(ads[1]), "--id-column", "row_id"]
    assert main(command + ["--out", str(scores)]) == 0
    table = pq.read_table(scores)
    assert table.column_names == ["row_id", "probability"] and table.num_rows == 3000
    assert abs(table.column("probability").to_numpy().mean() - SMALL.base_rate) < 0.05


def test_labels_from_a_noisy_source_on_the_command_line(ads, train_argv, tmp_path, capsys) -> None:  # noqa: F811
    """Labels the source flipped at 20 % train; the same table's clean labels are refused with the numbers:
    the stated channel cannot report so few positives, so nothing would deliver its guarantee."""
    clean = train_argv[:-2] + ["--source-channel", "flip:0.2", "--model", "fm", "--out", str(tmp_path / "clean")]
    assert main(clean) == 2
    assert "where the stated channel reports it with a probability between 20.00% and 80.00%" in capsys.readouterr().err
    table = pq.read_table(ads[0])
    flips = np.random.default_rng(0).random(table.num_rows) < 0.2
    labels = table.column("converted").to_numpy() ^ flips
    pq.write_table(table.set_column(table.schema.get_field_index("converted"), "converted", pa.array(labels)),
                   tmp_path / "flipped.parquet")  # fmt: skip
    argv = [str(tmp_path / "flipped.parquet") if arg == str(ads[0]) else arg for arg in clean]
    assert main([*argv[:-1], str(tmp_path / "source")]) == 0
    summary = json.loads((tmp_path / "source" / "summary.json").read_text())
    assert summary["route"] == "source" and summary["model"] == "fm" and summary["epsilon_per_unit"] > 1.38


@pytest.mark.parametrize(
    "extra, message",
    [
        ([], "give --epsilon"),
        (["--epsilon", "1", "--source-channel", "flip:0.1"], "the source states the guarantee"),
        (["--route", "rr", "--source-channel", "flip:0.1"], "is --route source"),
        (["--epsilon", "1", "--route", "counts", "--model", "fm"], "logistic regression"),
        (["--epsilon", "1", "--max-rows-per-unit", "3"], "--privacy-unit"),
        (["--epsilon", "1", "--slot-bits", "device:3"], "SLOT=BITS"),
        (["--epsilon", "1", "--slot-bits", "hour=3"], "not hashed"),
        (["--route", "reports"], "--reports PATH"),
    ],
)
def test_flags_that_cannot_work_are_refused_before_anything_is_read(train_argv, tmp_path, capsys, extra, message):
    assert main(train_argv + extra + ["--out", str(tmp_path / "run")]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_a_sources_aggregate_reports_on_the_command_line(ads, tmp_path, capsys) -> None:  # noqa: F811
    from labeldp.ads import hash_spec
    from tests.ads.test_reports import _reports

    columns = ["advertiser", "campaign", "site", "device"]
    path = tmp_path / "reports.parquet"
    _reports(ads[0], hash_spec(columns, bits=8), 1.0, 4.0).to_parquet(path)
    argv = ["hashed", "train", "--table", str(ads[0]), "--columns", *columns, "--bits", "8", "--reports", str(path)]
    assert main(argv + ["--block-rows", "2048", "--out", str(tmp_path / "run")]) == 0
    assert "reports route, lr" in capsys.readouterr().out
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["epsilon_per_unit"] == pytest.approx(4.0, 1e-3)
    assert main(argv + ["--insecure-noise-seed", "1", "--out", str(tmp_path / "other")]) == 2
    assert "labeldp draws nothing" in capsys.readouterr().err
