"""A pure release's epsilon is exact on the ledger, and every printed epsilon reads it rounded up."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from labeldp.accounting import PrivacyLedger
from labeldp.accounting.events import randomized_response_event
from labeldp.accounting.rounding import format_epsilon
from labeldp.cli import main


@pytest.mark.parametrize(("epsilon", "classes"), [(1.0, 2), (1.0, 10), (2.0, 10), (0.1, 10), (4.0, 100)])
def test_one_randomized_response_puts_exactly_its_epsilon_on_the_ledger(epsilon, classes) -> None:
    ledger = PrivacyLedger(3)
    ledger.record(randomized_response_event(epsilon, classes), np.ones(3, dtype=bool), "rr")
    assert ledger.epsilon(0.0) == epsilon and format_epsilon(ledger.epsilon(0.0)) == f"{epsilon:g}"
    per_unit = PrivacyLedger(4, units=np.array([0, 0, 0, 1]))
    for row in range(3):  # a unit of three rows, each at epsilon / 3
        per_unit.record(randomized_response_event(epsilon / 3, classes), np.arange(4) == row, "rr")
    assert per_unit.epsilon(0.0) == epsilon


def test_privatize_and_hashed_train_print_epsilon_1_as_1(tmp_path, capsys) -> None:
    frame = pd.DataFrame({"site": [f"s{i % 7}" for i in range(400)], "y": np.arange(400) % 2})
    frame.to_csv(tmp_path / "t.csv", index=False)
    pq.write_table(pa.Table.from_pandas(frame), tmp_path / "t.parquet")
    argv = ["privatize", "--table", str(tmp_path / "t.csv"), "--label-column", "y", "--classes", "0", "1"]
    assert main([*argv, "--epsilon", "1", "--out", str(tmp_path / "r")]) == 0
    assert "epsilon 1 per row (delta 0, replace-one label), the ledger's" in capsys.readouterr().out
    argv = ["hashed", "train", "--table", str(tmp_path / "t.parquet"), "--label-column", "y", "--classes", "0", "1"]
    assert main([*argv, "--columns", "site", "--bits", "4", "--epsilon", "1", "--out", str(tmp_path / "h")]) == 0
    printed = capsys.readouterr().out
    assert "epsilon 1 per row (delta 0, replace-one label), the ledger's" in printed
    assert "rows/s of training, the whole run" in printed and "rows/s of the table, release included" in printed
