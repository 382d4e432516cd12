"""A table read out of core: record batches file after file, the read-ahead bounded, and what is read of
its public columns (each row's key, a release's people, the rows a privacy unit keeps).

Every column but those a caller names as its own (the label, or the label and unit columns) is cast to the
first file's type; those keep each file's own type and are matched as text by :mod:`labeldp.boundary`,
which reads the labels (:mod:`labeldp.boundary.table_source`). Nothing here reads a label.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds

from labeldp._validation import check_priors
from labeldp.accounting.spending import Source
from labeldp.errors import DataError
from labeldp.tables.keys import canonical_text, duplicated_ids_error, row_keys
from labeldp.tables.table_files import describe_dataset, is_csv, open_source, reading, source_schema

_READ_ROWS = 1 << 16  # rows per batch read from a file
#: rows a release draws (and writes, as one Parquet row group) at a time; they set the memory used, about
#: 60 bytes a row plus 8 a class for RR-with-prior's priors
DEFAULT_BATCH_ROWS = 1 << 20


def read_batches(
    datasets: list[ds.Dataset], schema: pa.Schema, label_column: str | Sequence[str | None] | None = None
) -> Iterator[pa.RecordBatch]:
    """Non-empty record batches of ``schema``'s columns, file after file, the read-ahead bounded.

    Every column but ``label_column`` (the label, or the label and unit columns) is cast to ``schema``'s
    type; those keep each file's own type and are matched as text (a cast would fail on a label that does
    not fit and quote it; a unit ``"anonymous"`` cannot be cast to the first file's integers).
    """
    own = {label_column} if isinstance(label_column, str) else {c for c in label_column or () if c}
    for dataset in datasets:
        with reading(describe_dataset(dataset), is_csv(dataset)):
            for batch in dataset.to_batches(
                columns=schema.names, batch_size=_READ_ROWS, batch_readahead=2, fragment_readahead=1
            ):
                if batch.num_rows:
                    yield _conformed(batch, schema, own, dataset)


def _conformed(batch: pa.RecordBatch, schema: pa.Schema, own: set[str], dataset: ds.Dataset) -> pa.RecordBatch:
    """``batch`` with its columns but ``own`` cast to ``schema``'s types (public columns: an error may quote them)."""
    if batch.schema == schema:
        return batch
    columns = []
    for field, column in zip(schema, batch.columns):
        if field.name not in own and column.type != field.type:
            try:
                column = column.cast(field.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
                raise DataError(
                    f"{describe_dataset(dataset)}: column {field.name!r} does not have the first file's type "
                    f"{field.type} ({error})"
                ) from None
        columns.append(column)
    return pa.RecordBatch.from_arrays(columns, names=list(schema.names))


def column_keys(source, column: str) -> np.ndarray:
    """Each row's key in the public ``column`` of a table (:func:`~labeldp.tables.keys.row_keys`, 8 bytes a
    row), its spelling matched as text as a unit's is; reads no label."""
    datasets, described = open_source(source, [column])
    keys = [
        row_keys(batch.column(0), f"column {column!r} of {described} has missing values: every row needs its person")
        for batch in read_batches(datasets, source_schema(datasets, [column]), column)
    ]
    return joined(keys)


def ledger_source(source, facts: dict, rows=None, unit_keys=None, ids=None, **named) -> Source:
    """What a release of the table ``source`` (public ``facts``: :func:`~labeldp.accounting.datasets.table_facts`)
    reads, as the dataset ledgers see it: each released row's key in any column (``rows``, a mask of the
    released rows; None: all), the unit column's from ``unit_keys`` (every row's), a checked id column's from
    ``ids`` (sorted, distinct); ``named``: :class:`Source`'s names."""

    def keys(column: str) -> np.ndarray:
        found = unit_keys if column == named.get("unit") and unit_keys is not None else column_keys(source, column)
        return found if rows is None else found[rows]

    def distinct(column: str) -> np.ndarray | None:
        return ids if rows is None and column == named.get("id_column") else None

    def every(column: str) -> np.ndarray:
        return unit_keys if column == named.get("unit") and unit_keys is not None else column_keys(source, column)

    return Source(table=facts, columns=facts["columns"], keys=keys, distinct=distinct, every=every, **named)


def check_prior_rows(batch: pa.RecordBatch, prior_columns: tuple[str, ...]) -> None:
    """A batch's prior columns: no missing value, each row a distribution over the classes."""
    for name in prior_columns:
        if batch.column(name).null_count:
            raise DataError(f"prior column {name!r} has missing values")
    check_priors(np.column_stack([batch.column(name).to_numpy(zero_copy_only=False) for name in prior_columns]))


def joined(chunks: list[np.ndarray]) -> np.ndarray:
    """The chunks as one int64 array, each freed once copied (the peak is about the total); empties ``chunks``."""
    whole = np.empty(sum(chunk.size for chunk in chunks), dtype=np.int64)
    stop = whole.size
    while chunks:
        chunk = chunks.pop()
        whole[stop - chunk.size : stop] = chunk
        stop -= chunk.size
    return whole


def unit_missing(column: str) -> str:
    return f"privacy unit column {column!r} has missing values: every row needs its unit"


def refuse_duplicated_ids(
    datasets: list[ds.Dataset], field: pa.Field, keys: np.ndarray, own_types: bool = False
) -> None:
    """Refuse a table in which an id occurs twice, from every row's key (sorted here, in place).

    Where keys repeat, the ids of those keys are compared by their canonical spelling, so that a hash
    collision never refuses a valid table.
    """
    keys.sort()
    repeated = np.unique(keys[1:][keys[1:] == keys[:-1]])
    if not repeated.size:
        return
    met: set[str] = set()
    for batch in read_batches(datasets, pa.schema([field]), field.name if own_types else None):
        ids = batch.column(0)
        found = ids.filter(pa.array(np.isin(row_keys(ids), repeated)))
        for spelling in canonical_text(found) if len(found) else ():
            if spelling in met:
                raise duplicated_ids_error(f"id column {field.name!r}", spelling)
            met.add(spelling)


def kept_batches(
    batches: Iterator[pa.RecordBatch], kept: np.ndarray, position_column: str | None
) -> Iterator[pa.RecordBatch]:
    """The rows of ``batches`` that ``kept`` keeps (a unit's rows within its bound, decided from public
    columns), each with its stream position as the int64 column ``position_column`` where given.
    """
    seen = 0
    for batch in batches:
        stop = seen + batch.num_rows
        if stop > kept.size:
            raise DataError(f"the table changed while it was being released ({kept.size} rows, then more)")
        if position_column is not None:
            batch = batch.append_column(position_column, pa.array(np.arange(seen, stop, dtype=np.int64)))
        mask = kept[seen:stop]
        seen = stop
        if mask.all():
            yield batch
        elif mask.any():
            yield batch.filter(pa.array(mask))
