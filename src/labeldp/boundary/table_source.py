"""Reading a label column out of core: Parquet and CSV files, folders of them, Arrow tables.

The source is read file after file (a folder's in sorted order, names starting with ``.`` or ``_``
skipped) and cut into blocks of exactly ``batch_rows`` rows, so the draws do not depend on how it is cut.
Before anything is drawn, a first pass (:func:`check_rows`) checks every label against the declared
classes and every id for presence and uniqueness, and reads each row's privacy unit, from which the rows
kept are chosen for the second pass (:func:`kept_batches`).

Labels, ids and units are read as text from CSV and matched by their canonical spelling, each file's in
its own type: left to itself pyarrow would infer a column's type from the first block, so one private
label could decide it, a later one fail the read quoted in the error, and ``17`` and ``"17"`` be two
people. ``released_label``'s type depends on no label value
(:func:`~labeldp.boundary.table_files.released_type`), and pyarrow's message for an unreadable CSV file is
withheld (it can quote a row).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from labeldp._validation import check_priors
from labeldp.accounting.spending import Source
from labeldp.boundary.column import duplicated_ids_error
from labeldp.boundary.domain import LabelDomain, canonical_label
from labeldp.boundary.keys import canonical_text, row_keys
from labeldp.boundary.table_files import _describe, _is_csv, _reading, check_each_row_once, open_source, source_schema
from labeldp.errors import ConfigError, DataError

_READ_ROWS = 1 << 16  # rows per batch read from a file


def arrow_class_values(domain: LabelDomain, value_type: pa.DataType, column: str) -> pa.Array:
    """The classes as an Arrow array of ``value_type``, the type ``released_label`` is written in."""
    values = []
    for declared in domain.declared:
        spelling = canonical_label(declared)
        value: int | float | str
        try:
            if pa.types.is_integer(value_type):
                value = int(spelling)
            elif pa.types.is_floating(value_type):
                value = float(spelling)
            elif pa.types.is_boolean(value_type):
                value = {"1": True, "0": False}[spelling]
            elif pa.types.is_string(value_type) or pa.types.is_large_string(value_type):
                value = str(declared)
            else:
                raise ConfigError(
                    f"label column {column!r} has type {value_type}: privatize releases integer, "
                    "floating-point, boolean or string labels"
                )
            values.append(value)
        except (ValueError, KeyError):
            raise ConfigError(f"class {declared!r} is not a value of label column {column!r} ({value_type})") from None
    try:
        return pa.array(values, type=value_type)
    except (pa.ArrowInvalid, OverflowError) as error:
        raise ConfigError(f"the classes do not fit label column {column!r} ({value_type}): {error}") from None


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
        with _reading(_describe(dataset), _is_csv(dataset)):
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
                    f"{_describe(dataset)}: column {field.name!r} does not have the first file's type "
                    f"{field.type} ({error})"
                ) from None
        columns.append(column)
    return pa.RecordBatch.from_arrays(columns, names=list(schema.names))


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
                units.append(row_keys(batch.column(unit_column), _unit_missing(unit_column)))
            if id_column is not None:
                ids.append(row_keys(batch.column(id_column), f"id column {id_column!r} has missing values"))
        per_file.append(rows)
    if not sum(per_file):
        raise DataError(f"{described} has no rows")
    if id_column is not None:
        _refuse_duplicated_ids(datasets, schema.field(id_column), _joined(ids), own_types=True)
    return KeyColumns(names, per_file, labels, _joined(units) if unit_column is not None else None)


def column_keys(source, column: str) -> np.ndarray:
    """Each row's key in the public ``column`` of a table (:func:`~labeldp.boundary.keys.row_keys`, 8 bytes a
    row), its spelling matched as text as a unit's is; reads no label."""
    datasets, described = open_source(source, [column])
    keys = [
        row_keys(batch.column(0), f"column {column!r} of {described} has missing values: every row needs its person")
        for batch in read_batches(datasets, source_schema(datasets, [column]), column)
    ]
    return _joined(keys)


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
    distinct (8 bytes a row: :func:`~labeldp.boundary.keys.row_keys`; without an id column, positions are
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
            _check_prior_rows(batch, prior_columns)
        if unit_column is not None:
            units.append(row_keys(batch.column(unit_column), _unit_missing(unit_column)))
        if id_column is not None:
            keys.append(row_keys(batch.column(1), f"id column {id_column!r} has missing values"))
    if rows == 0:
        raise DataError(f"{described} has no rows")
    id_keys = None
    if id_column is not None:
        id_keys = _joined(keys)
        _refuse_duplicated_ids(datasets, schema.field(id_column), id_keys)
    return rows, _joined(units) if unit_column is not None else None, id_keys


def _check_prior_rows(batch: pa.RecordBatch, prior_columns: tuple[str, ...]) -> None:
    """A batch's prior columns: no missing value, each row a distribution over the classes."""
    for name in prior_columns:
        if batch.column(name).null_count:
            raise DataError(f"prior column {name!r} has missing values")
    check_priors(np.column_stack([batch.column(name).to_numpy(zero_copy_only=False) for name in prior_columns]))


def _joined(chunks: list[np.ndarray]) -> np.ndarray:
    """The chunks as one int64 array, each freed once copied (the peak is about the total); empties ``chunks``."""
    joined = np.empty(sum(chunk.size for chunk in chunks), dtype=np.int64)
    stop = joined.size
    while chunks:
        chunk = chunks.pop()
        joined[stop - chunk.size : stop] = chunk
        stop -= chunk.size
    return joined


def _unit_missing(column: str) -> str:
    return f"privacy unit column {column!r} has missing values: every row needs its unit"


def _refuse_duplicated_ids(
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
