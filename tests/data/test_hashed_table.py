"""The hashed table's public columns read whole (labeldp.data.hashed_table): a privacy unit is one unit
whatever type each file of a folder writes it in."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from labeldp.boundary.units import bounded_rows
from labeldp.data.hashed_table import read_column
from labeldp.errors import DataError


def test_a_column_is_read_in_the_first_files_type_so_that_a_user_is_one_privacy_unit(tmp_path) -> None:
    pq.write_table(pa.table({"user_id": pa.array([7] * 5, pa.int64())}), tmp_path / "part-0.parquet")
    pq.write_table(pa.table({"user_id": pa.array(["7"] * 5)}), tmp_path / "part-1.parquet")
    units = read_column(tmp_path, "user_id")
    assert units.dtype == np.int64 and set(units.tolist()) == {7}
    kept, _, most_rows = bounded_rows(units, 3, 0)
    assert kept.size == 3 and most_rows == 3  # one user: 3 of its 10 rows, not 3 per file


def test_a_file_whose_column_cannot_take_the_first_files_type_is_refused(tmp_path) -> None:
    pq.write_table(pa.table({"user_id": pa.array([7], pa.int64())}), tmp_path / "part-0.parquet")
    pq.write_table(pa.table({"user_id": pa.array(["u-7"])}), tmp_path / "part-1.parquet")
    with pytest.raises(DataError, match="first file's type"):
        read_column(tmp_path, "user_id")
