"""DataFrames and Arrow batches as an engine's tasks (Spark, Dask) hold a table's rows: a DataFrame made an
Arrow table or batch, its text columns as text, and each row's identity as columns. Light to import: an
executor imports it with :mod:`labeldp.boundary.batches`; nothing here reads a label."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from labeldp.errors import DataError
from labeldp.tables.keys import row_identities

#: the columns a release adds while it runs: its id's identity (two words), its unit's, its rank in the unit
I0, I1, U0, U1, RANK = (f"__labeldp_{name}__" for name in ("i0", "i1", "u0", "u1", "rank"))


def with_identity(batch: pa.RecordBatch, column: str, first: str = I0, second: str = I1) -> pa.RecordBatch:
    """``batch`` with the identity of each row's ``column`` as two int64 columns
    (:func:`~labeldp.tables.keys.row_identities`)."""
    words = row_identities(batch.column(column)).view(np.int64)
    return batch.append_column(first, pa.array(words[:, 0])).append_column(second, pa.array(words[:, 1]))


def arrow_of(frame: pd.DataFrame, text_columns: list[str]) -> pa.Table:
    """A DataFrame as an Arrow table, object text columns made text first: Arrow would infer their type from
    the values and quote the first that does not fit.
    """
    objects = [c for c in text_columns if c in frame.columns and frame[c].dtype == object]
    if objects:
        frame = frame.assign(**{c: frame[c].map(lambda v: None if pd.isna(v) else str(v)) for c in objects})
    try:
        return pa.Table.from_pandas(frame, preserve_index=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        raise DataError(
            "the DataFrame cannot be converted to an Arrow table: a column of mixed Python objects? "
            "(pyarrow's message is withheld: it may quote a value)"
        ) from None


def identity_frame(values: pd.Series) -> pd.DataFrame:
    """The identity of each value (:func:`~labeldp.tables.keys.row_identities`) as two int64 columns, ``i0``
    and ``i1``."""
    words = row_identities(values).view(np.int64)
    return pd.DataFrame({"i0": words[:, 0], "i1": words[:, 1]})


def batch_of(frame: pd.DataFrame, text_columns: list[str]) -> pa.RecordBatch:
    """A DataFrame (a partition) as one Arrow batch (:func:`arrow_of`)."""
    table = arrow_of(frame, text_columns).combine_chunks()
    return (table.to_batches() or [pa.RecordBatch.from_pylist([], schema=table.schema)])[0]
