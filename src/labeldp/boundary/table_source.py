"""Reading a label column out of core: Parquet and CSV files, folders of them, Arrow tables.

The source is read file after file (a folder's in sorted order, names starting with ``.`` or ``_``
skipped) and cut into blocks of exactly ``batch_rows`` rows, so the draws do not depend on how it is cut.
Before anything is drawn, a first pass (:func:`check_rows`) checks every label against the declared
classes and every id for presence and uniqueness, and reads each row's privacy unit, from which the rows
kept are chosen for the second pass (:func:`kept_batches`).

Labels, ids and units are read as text from CSV and matched by their canonical spelling, each file's in
its own type: left to itself pyarrow would infer a column's type from the first block, so one private
label could decide it, a later one fail the read quoted in the error, and ``17`` and ``"17"`` be two
people. ``released_label``'s type depends on no label value (:func:`released_type`), and pyarrow's
message for an unreadable CSV file is withheld (it can quote a row).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.dataset as ds

from labeldp._validation import check_priors
from labeldp.boundary.column import duplicated_ids_error
from labeldp.boundary.domain import LabelDomain, canonical_label
from labeldp.boundary.keys import canonical_text, row_keys
from labeldp.errors import ConfigError, DataError, MissingFileError

_READ_ROWS = 1 << 16  # rows per batch read from a file
_FORMATS = {".parquet": "parquet", ".pq": "parquet", ".parq": "parquet", ".csv": "csv", ".txt": "csv", ".tsv": "tsv"}


def arrow_positions(domain: LabelDomain, column: pa.Array | pa.ChunkedArray, where: str) -> np.ndarray:
    """Class positions (int64) of an Arrow label column, matched as text; releases nothing.

    A label missing or outside the classes raises :class:`~labeldp.errors.DataError` saying neither which,
    where, nor how many.
    """
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if column.null_count:
        raise domain.refusal(where)
    if pa.types.is_dictionary(column.type):
        column = column.cast(column.type.value_type)
    encoded = pc.dictionary_encode(column)
    positions = domain.value_positions(encoded.dictionary.to_pylist(), where)
    return positions[encoded.indices.to_numpy(zero_copy_only=False)]


def arrow_class_values(domain: LabelDomain, value_type: pa.DataType, column: str) -> pa.Array:
    """The classes as an Arrow array of ``value_type``, the type ``released_label`` is written in."""
    values = []
    for declared in domain.declared:
        spelling = canonical_label(declared)
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


def open_source(source, text_columns: str | Sequence[str | None]) -> tuple[list[ds.Dataset], str]:
    """The source as datasets to scan in order (one per file), and its description in words.

    ``source`` is a Parquet or CSV file, a folder of them (:func:`data_files`), an Arrow table or dataset, or
    a DataFrame; ``text_columns`` (the label, id and unit columns) are read as text from CSV files and from a
    DataFrame's object columns.
    """
    text_columns = [text_columns] if isinstance(text_columns, str) else [c for c in text_columns if c]
    if isinstance(source, pd.DataFrame):
        return [ds.dataset(_frame_table(source, text_columns))], "an in-memory table"
    if isinstance(source, pa.Table):
        return [ds.dataset(source)], "an in-memory table"
    if isinstance(source, ds.Dataset):
        return [source], "a pyarrow dataset"
    return [_open(f, text_columns) for f in data_files(source)], str(source)


def data_files(source) -> list[Path]:
    """The data files of a file or folder, in reading order: a folder's sorted, names starting with ``.`` or
    ``_`` skipped (``.crc``, ``_SUCCESS``, ``_metadata`` are not data, as for pyarrow and Spark).
    """
    path = Path(source)
    if not path.exists():
        raise MissingFileError(f"table {path} does not exist")
    if path.is_file():
        return [path]
    files = sorted(
        f
        for f in path.rglob("*")
        if f.is_file() and not any(part.startswith((".", "_")) for part in f.relative_to(path).parts)
    )
    if not files:
        raise DataError(f"folder {path} holds no data files")
    return files


def check_each_row_once(
    files: int, described: str, id_column: str | None, unit_column: str | None, one_row_per_person: bool
) -> None:
    """Refuse a source of several files without ids or units unless the user states one row per person.

    A row held twice (``events.csv`` beside ``events.parquet``) would be released twice under a ledger
    showing one release. With ids, duplicates are caught (:func:`check_rows`); with units, a unit's rows are
    bounded however often they occur. A single file is taken as holding each person once: rows are never
    refused for having equal public columns.
    """
    if files > 1 and id_column is None and unit_column is None and not one_row_per_person:
        raise DataError(
            f"{described} holds {files} data files and no id column: a row held in two of them (a stray copy, "
            "events.csv beside events.parquet) would be released twice under a ledger that shows one release. "
            "Name an id column (--id-column, id_column=) so that duplicated rows are refused, or a privacy unit "
            "(--privacy-unit), or state that every row is a different person (--one-row-per-person, "
            "one_row_per_person=True)"
        )


def _frame_table(frame: pd.DataFrame, text_columns: list[str]) -> pa.Table:
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


def _open(path: Path, text_columns: list[str]) -> ds.Dataset:
    file_format = _file_format(path, text_columns)
    with _reading(str(path), isinstance(file_format, ds.CsvFileFormat)):  # CSV: reads the first block
        return ds.dataset(path, format=file_format)


def file_kind(path: Path) -> str:
    """``"parquet"``, ``"csv"`` or ``"tsv"`` from a data file's suffixes (``.gz`` or ``.bz2`` may follow a CSV's)."""
    suffixes = [s.lower() for s in Path(path).suffixes]
    if suffixes and suffixes[-1] in (".gz", ".bz2") and len(suffixes) > 1:
        suffixes = suffixes[:-1]  # compressed CSV: pyarrow reads it by its extension
    kind = _FORMATS.get(suffixes[-1] if suffixes else "")
    if kind is None:
        raise DataError(f"{path} is not a Parquet (.parquet, .pq) or CSV (.csv, .tsv, optionally .gz) file")
    return kind


def _file_format(path: Path, text_columns: list[str]) -> ds.FileFormat:
    kind = file_kind(path)
    if kind == "parquet":
        # Pages read through a 1 MiB buffer, not whole column chunks read ahead ("pre-buffering", which
        # helps on object stores): bounded memory, and on a local disk a scan in a third of the CPU time.
        return ds.ParquetFileFormat(
            default_fragment_scan_options=ds.ParquetFragmentScanOptions(
                pre_buffer=False, use_buffered_stream=True, buffer_size=1 << 20
            )
        )
    # The labels, ids and units are read as text. Left to itself, pyarrow infers a column's type from
    # the values of the file's first block: a private label would decide it, a later label that does not
    # fit it would fail the read with an error quoting it, and a user id would be 17 here, "17" there.
    # Empty strings stay strings: no spelling of a label is a missing value.
    return ds.CsvFileFormat(
        parse_options=pa_csv.ParseOptions(delimiter="\t" if kind == "tsv" else ","),
        convert_options=pa_csv.ConvertOptions(column_types={c: pa.string() for c in text_columns}),
    )


def _is_csv(dataset: ds.Dataset) -> bool:
    return isinstance(getattr(dataset, "format", None), ds.CsvFileFormat)


@contextlib.contextmanager
def _reading(where: str, csv: bool) -> Iterator[None]:
    """pyarrow's read errors as DataErrors, a CSV reader's message withheld (it can quote a row's label)."""
    try:
        yield
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as error:
        detail = (
            "pyarrow's message is withheld: it may quote a row, its label included"
            if csv
            else f"{type(error).__name__}: {error}"
        )
        raise DataError(f"{where} cannot be read ({detail})") from None


def source_schema(datasets: list[ds.Dataset], columns: list[str]) -> pa.Schema:
    """The needed columns' types from the first file (dictionary columns as their values); later files' ids
    and priors are cast to them, their labels never (:func:`read_batches`).
    """
    for dataset in datasets:
        missing = [c for c in columns if c not in dataset.schema.names]
        if missing:
            raise DataError(
                f"columns {missing} not found in {_describe(dataset)}; its columns are {dataset.schema.names}"
            )
    fields = [datasets[0].schema.field(c) for c in columns]
    return pa.schema(
        [field.with_type(field.type.value_type) if pa.types.is_dictionary(field.type) else field for field in fields]
    )


def released_type(datasets: list[ds.Dataset], domain: LabelDomain) -> pa.DataType:
    """The type of ``released_label``, from the declared classes and whether a file is CSV, never from a label
    value or a type pandas guessed from them: int64 where every class is a whole number, float64 where every
    class is a number, else string (always string with a CSV file, whose labels are read as text).
    """
    if any(_is_csv(dataset) for dataset in datasets):
        return pa.string()
    spellings = list(domain.lookup)
    if all(re.fullmatch(r"-?\d+", s) and -(1 << 63) <= int(s) < (1 << 63) for s in spellings):
        return pa.int64()
    if all(_is_number(s) for s in spellings):
        return pa.float64()
    return pa.string()


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _describe(dataset: ds.Dataset) -> str:
    files = getattr(dataset, "files", None)
    return files[0] if files else "the table"


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
        return np.concatenate([arrow_positions(domain, chunk, where) for chunk in self.labels])

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
) -> tuple[int, np.ndarray | None]:
    """The first pass: the number of rows and each row's unit key (None without ``unit_column``), once every
    label, id, unit and prior row is checked; releases nothing.

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
        arrow_positions(domain, batch.column(0), where)
        rows += batch.num_rows
        if prior_columns:  # public: checked before anything is drawn, not block by block while drawing
            _check_prior_rows(batch, prior_columns)
        if unit_column is not None:
            units.append(row_keys(batch.column(unit_column), _unit_missing(unit_column)))
        if id_column is not None:
            keys.append(row_keys(batch.column(1), f"id column {id_column!r} has missing values"))
    if rows == 0:
        raise DataError(f"{described} has no rows")
    if id_column is not None:
        _refuse_duplicated_ids(datasets, schema.field(id_column), _joined(keys))
    return rows, _joined(units) if unit_column is not None else None


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
            positions[filled:stop] = arrow_positions(domain, piece.column(label_column), where)
            if id_column is None:
                identifiers = pa.array(np.arange(seen, seen + piece.num_rows, dtype=np.int64))
            else:
                identifiers = piece.column(id_column)
                if identifiers.null_count:
                    raise DataError(f"id column {id_column!r} has missing values")
            ids.append(identifiers)
            seen += piece.num_rows
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
