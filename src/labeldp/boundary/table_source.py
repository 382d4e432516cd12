"""Reading a label column out of core: Parquet and CSV files, folders of them, Arrow tables, read in batches
by :mod:`labeldp.tables.table_batches`; here the labels are matched to the declared classes.

The source is read file after file (a folder's in sorted order, names starting with ``.`` or ``_``
skipped) and cut into blocks of exactly ``batch_rows`` rows, so the draws do not depend on how it is cut.
Before anything is drawn, a first pass (:func:`check_rows`) checks every label against the declared
classes and every id for presence and uniqueness, and reads each row's privacy unit, from which the rows
kept are chosen for the second pass (:func:`~labeldp.tables.table_batches.kept_batches`).

Labels, ids and units are read as text from CSV and matched by their canonical spelling, each file's in
its own type: left to itself pyarrow would infer a column's type from the first block, so one private
label could decide it, a later one fail the read quoted in the error, and ``17`` and ``"17"`` be two
people. ``released_label``'s type depends on no label value
(:func:`~labeldp.tables.table_files.released_type`), and pyarrow's message for an unreadable CSV file is
withheld (it can quote a row).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from labeldp.boundary.domain import LabelDomain
from labeldp.errors import DataError
from labeldp.tables.keys import row_keys
from labeldp.tables.table_batches import check_prior_rows, joined, read_batches, refuse_duplicated_ids, unit_missing
from labeldp.tables.table_files import check_each_row_once, open_source, source_schema


@dataclass(frozen=True)
class KeyColumns:
    """A whole table's label, id and unit columns in memory, as :func:`read_key_columns` read them.

    ``labels`` holds the true labels, each batch in its file's own type (text from CSV): only a loader
    matching them to the declared domain reads them, and wraps the result at once.
    """

    columns: list[str]
    rows_per_file: list[int]
    labels: list[pa.Array]
    unit_keys: np.ndarray | None

    @property
    def rows(self) -> int:
        return sum(self.rows_per_file)

    def class_positions(self, domain: LabelDomain, where: str) -> np.ndarray:
        """The labels' class positions (a label missing or outside the classes refused unnamed)."""
        return np.concatenate([domain.arrow_positions(chunk, where) for chunk in self.labels])

    def numbers(self, where: str) -> np.ndarray:
        """The labels as float64 numbers; a label that is no number (or is missing) refused unnamed."""
        values = []
        for chunk in self.labels:
            if pa.types.is_string(chunk.type) or pa.types.is_large_string(chunk.type):
                chunk = pc.utf8_trim_whitespace(chunk)
            try:
                values.append(chunk.cast(pa.float64()).to_numpy(zero_copy_only=False))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                values.append(None)
            if values[-1] is None or chunk.null_count:
                raise DataError(
                    f"the {where} of a regression must be numbers, none missing (which and how many are not "
                    "said: the labels are private; nothing was released)"
                )
        return np.concatenate(values)


def read_key_columns(
    source,
    label_column: str,
    id_column: str | None = None,
    unit_column: str | None = None,
    *,
    one_row_per_person: bool = False,
) -> KeyColumns:
    """A whole table's label, id and unit columns in memory, checked as :func:`check_rows` checks a release's.

    Reads the true labels and releases nothing: the caller wraps them as private labels.
    """
    datasets, described = open_source(source, [label_column, id_column, unit_column])
    names = list(datasets[0].schema.names)
    if label_column not in names:
        raise DataError(
            f"label column {label_column!r} not found: name the table's label column with --label-column COL "
            f"(label_column=...); its columns are {names}"
        )
    check_each_row_once(len(datasets), described, id_column, unit_column, one_row_per_person)
    needed = [c for c in (label_column, id_column, unit_column) if c is not None]
    schema = source_schema(datasets, needed)
    labels: list[pa.Array] = []
    units: list[np.ndarray] = []
    ids: list[np.ndarray] = []
    per_file = []
    for dataset in datasets:
        rows = 0
        for batch in read_batches([dataset], schema, needed):
            rows += batch.num_rows
            labels.append(batch.column(label_column))
            if unit_column is not None:
                units.append(row_keys(batch.column(unit_column), unit_missing(unit_column)))
            if id_column is not None:
                ids.append(row_keys(batch.column(id_column), f"id column {id_column!r} has missing values"))
        per_file.append(rows)
    if not sum(per_file):
        raise DataError(f"{described} has no rows")
    if id_column is not None:
        refuse_duplicated_ids(datasets, schema.field(id_column), joined(ids), own_types=True)
    return KeyColumns(names, per_file, labels, joined(units) if unit_column is not None else None)


# ----------------------------------------------------------------------------------------------------
# Out of core: the first pass, before anything is drawn or written


def check_rows(
    datasets: list[ds.Dataset],
    schema: pa.Schema,
    domain: LabelDomain,
    label_column: str,
    id_column: str | None,
    described: str,
    prior_columns: tuple[str, ...] | None = None,
    unit_column: str | None = None,
) -> tuple[int, np.ndarray | None, np.ndarray | None]:
    """The first pass: the number of rows, each row's unit key and the ids' keys, sorted (None without
    ``unit_column``, ``id_column``), once every label, id, unit and prior row is checked; releases nothing.

    Every label must be one of the classes (the error says neither which nor how many), every id present and
    distinct (8 bytes a row: :func:`~labeldp.tables.keys.row_keys`; without an id column, positions are
    the ids; a duplicated id is named, ids being public), every unit present, and each row of RR-with-prior's
    ``prior_columns`` a distribution. A unit key is an integer unit itself, any other unit's hash.
    """
    where = f"label column {label_column!r}"
    keys: list[np.ndarray] = []
    prior_columns = tuple(prior_columns or ())
    units: list[np.ndarray] = []
    ids = [schema.field(id_column)] if id_column is not None else []
    unit = [schema.field(unit_column)] if unit_column is not None else []
    fields = [schema.field(label_column), *ids, *unit, *(schema.field(name) for name in prior_columns)]
    rows = 0
    for batch in read_batches(datasets, pa.schema(fields), (label_column, unit_column)):
        domain.arrow_positions(batch.column(0), where)
        rows += batch.num_rows
        if prior_columns:  # public: checked before anything is drawn, not block by block while drawing
            check_prior_rows(batch, prior_columns)
        if unit_column is not None:
            units.append(row_keys(batch.column(unit_column), unit_missing(unit_column)))
        if id_column is not None:
            keys.append(row_keys(batch.column(1), f"id column {id_column!r} has missing values"))
    if rows == 0:
        raise DataError(f"{described} has no rows")
    id_keys = None
    if id_column is not None:
        id_keys = joined(keys)
        refuse_duplicated_ids(datasets, schema.field(id_column), id_keys)
    return rows, joined(units) if unit_column is not None else None, id_keys


@dataclass
class _Block:
    """``rows`` consecutive rows ready for the mechanism: ids, class positions and prior rows (float64, each
    class a contiguous column, as RR-with-prior reads them); views of buffers the next block reuses.
    """

    ids: pa.ChunkedArray
    positions: np.ndarray
    prior: np.ndarray | None

    @property
    def rows(self) -> int:
        return self.positions.size


def read_blocks(
    batches: Iterator[pa.RecordBatch],
    rows: int,
    domain: LabelDomain,
    label_column: str,
    id_column: str | None,
    prior_columns: tuple[str, ...] | None,
) -> Iterator[_Block]:
    """The stream in blocks of exactly ``rows`` rows (the last shorter), whatever the batches' sizes, in
    buffers allocated once; without ``id_column`` the ids are stream positions.

    Reads the true labels as class positions for the draws and releases nothing: each block is released by
    :class:`~labeldp.boundary.column.Draws`.
    """
    positions = np.empty(rows, dtype=np.int64)
    prior = np.empty((rows, len(prior_columns)), dtype=np.float64, order="F") if prior_columns else None
    ids: list[pa.Array] = []
    filled = seen = 0
    where = f"label column {label_column!r}"
    for batch in batches:
        offset = 0
        while offset < batch.num_rows:
            piece = batch.slice(offset, min(rows - filled, batch.num_rows - offset))
            stop = filled + piece.num_rows
            positions[filled:stop] = domain.arrow_positions(piece.column(label_column), where)
            if id_column is None:
                identifiers = pa.array(np.arange(seen, seen + piece.num_rows, dtype=np.int64))
            else:
                identifiers = piece.column(id_column)
                if identifiers.null_count:
                    raise DataError(f"id column {id_column!r} has missing values")
            ids.append(identifiers)
            seen += piece.num_rows
            if prior is not None:  # with prior columns
                for position, name in enumerate(prior_columns or ()):
                    column = piece.column(name)
                    if column.null_count:
                        raise DataError(f"prior column {name!r} has missing values")
                    prior[filled:stop, position] = column.to_numpy(zero_copy_only=False)
            filled, offset = stop, offset + piece.num_rows
            if filled == rows:
                yield _Block(pa.chunked_array(ids, type=identifiers.type), positions, prior)
                ids, filled = [], 0
    if filled:
        yield _Block(pa.chunked_array(ids), positions[:filled], prior[:filled] if prior is not None else None)
