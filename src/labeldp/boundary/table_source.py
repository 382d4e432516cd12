"""Reading a label column out of core: Parquet and CSV files, folders of them, Arrow tables.

The source is read in record batches of bounded size, file after file (a folder in the order of its
sorted paths; names starting with ``.`` or ``_`` are skipped), and cut into blocks of exactly
``batch_rows`` rows, so that the draws do not depend on how the input is cut into files, row groups
or batches. Before anything is drawn, a first pass (:func:`check_rows`) reads the label and id
columns: every label must be one of the declared classes, every id present and distinct; with a
privacy unit it reads each row's unit too (public), from which the rows kept are chosen before the
second pass, which reads only those (:func:`kept_batches`).

**Label types.** Labels are matched to the declared classes as text (``1``, ``1.0`` and ``true`` are
one class), each file's labels in their own type: they are never cast to another file's type. A CSV
or TSV file's label column is read as text, as written: pyarrow would otherwise infer its type from
the first block's values, so that one private label could decide it (and a later label that does not
fit would fail the read, quoted in the error). ``released_label`` is written in one type that depends
on no label value (:func:`released_type`). pyarrow's own message for a CSV file it cannot read is
withheld (it can quote a row, its label included).

**Each row once.** The first pass keeps 8 bytes a row: integer ids as int64, compared exactly, other
ids as 64-bit hashes, where hashes collide compared exactly by a further scan of the id column, so
that a collision never refuses a valid table; a duplicated id is refused naming it (ids are public).
A privacy unit's values are kept as 64-bit keys the same way (8 bytes a row); two units whose keys
collide would count as one, which only bounds their rows together (never fewer units' worth of
protection), and happens with probability about n^2 / 2^64.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.dataset as ds

from labeldp._validation import check_priors
from labeldp.boundary.column import duplicated_ids_error
from labeldp.boundary.domain import LabelDomain, canonical_label
from labeldp.errors import ConfigError, DataError, MissingFileError

_READ_ROWS = 1 << 16  # rows per batch read from a file
_COLLISIONS_PER_SCAN = 1 << 10  # colliding id hashes checked exactly per scan of the id column
_FORMATS = {".parquet": "parquet", ".pq": "parquet", ".parq": "parquet", ".csv": "csv", ".tsv": "tsv"}


def arrow_positions(domain: LabelDomain, column: pa.Array | pa.ChunkedArray, where: str) -> np.ndarray:
    """Class positions (int64) of an Arrow label column, matched as text (:class:`LabelDomain`).

    Reads the labels it is given (true labels in :func:`check_rows` and :func:`read_blocks`, released
    ones in :func:`~labeldp.boundary.folder_format.load_release`) and releases nothing.

    Parameters
    ----------
    domain : LabelDomain
        The declared classes.
    column : pyarrow.Array or pyarrow.ChunkedArray
        The label column (dictionary-encoded columns are matched by their values).
    where : str
        What the labels are, for the error message.

    Returns
    -------
    numpy.ndarray
        (n,) int64 positions in the declared classes.

    Raises
    ------
    labeldp.errors.DataError
        If a label is missing or outside the classes (which, where and how many are not said).
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
    """The classes as values of ``value_type``, the type ``released_label`` is written in.

    Parameters
    ----------
    domain : LabelDomain
        The declared classes.
    value_type : pyarrow.DataType
        The type of ``released_label`` (:func:`released_type`).
    column : str
        The label column's name, for the error message.

    Returns
    -------
    pyarrow.Array
        The K classes, in order, of type ``value_type``.

    Raises
    ------
    labeldp.errors.ConfigError
        If the type is not integer, floating-point, boolean or string, or a class is not a value of it.
    """
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


def open_source(source, label_column: str) -> tuple[list[ds.Dataset], str]:
    """The source as datasets to scan in order, and a description of it.

    Parameters
    ----------
    source : str or os.PathLike or pyarrow.Table or pyarrow.dataset.Dataset or pandas.DataFrame
        A Parquet or CSV file, a folder of them (data files in the order of their sorted paths; names
        starting with ``.`` or ``_`` are skipped), an Arrow table or dataset, or a DataFrame.
    label_column : str
        The label column, read as text from CSV files (and from a DataFrame's column of objects).

    Returns
    -------
    datasets : list of pyarrow.dataset.Dataset
        One dataset per file (one for an in-memory source).
    described : str
        The source in words (its path, ``"an in-memory table"`` or ``"a pyarrow dataset"``).

    Raises
    ------
    labeldp.errors.MissingFileError
        If the path does not exist.
    labeldp.errors.DataError
        If a folder holds no data files, a file is neither Parquet nor CSV or cannot be read, or a
        DataFrame cannot be converted to Arrow (pyarrow's message withheld).
    """
    if isinstance(source, pd.DataFrame):
        return [ds.dataset(_frame_table(source, label_column))], "an in-memory table"
    if isinstance(source, pa.Table):
        return [ds.dataset(source)], "an in-memory table"
    if isinstance(source, ds.Dataset):
        return [source], "a pyarrow dataset"
    path = Path(source)
    if not path.exists():
        raise MissingFileError(f"table {path} does not exist")
    if path.is_file():
        files = [path]
    else:
        # Hidden and underscore names (.crc, _SUCCESS, _metadata) are not data, as for pyarrow and Spark.
        files = sorted(
            f
            for f in path.rglob("*")
            if f.is_file() and not any(part.startswith((".", "_")) for part in f.relative_to(path).parts)
        )
        if not files:
            raise DataError(f"folder {path} holds no data files")
    return [_open(f, label_column) for f in files], str(path)


def _frame_table(frame: pd.DataFrame, label_column: str) -> pa.Table:
    """A DataFrame as an Arrow table. A label column of Python objects becomes text first: Arrow
    would infer its type from the labels, and quote the first label that does not fit it."""
    if label_column in frame.columns and frame[label_column].dtype == object:
        frame = frame.assign(**{label_column: frame[label_column].astype("string")})
    try:
        return pa.Table.from_pandas(frame, preserve_index=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        raise DataError(
            "the DataFrame cannot be converted to an Arrow table: a column of mixed Python objects? "
            "(pyarrow's message is withheld: it may quote a value)"
        ) from None


def _open(path: Path, label_column: str) -> ds.Dataset:
    file_format = _file_format(path, label_column)
    with _reading(str(path), isinstance(file_format, ds.CsvFileFormat)):  # CSV: reads the first block
        return ds.dataset(path, format=file_format)


def _file_format(path: Path, label_column: str) -> ds.FileFormat:
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] in (".gz", ".bz2") and len(suffixes) > 1:
        suffixes = suffixes[:-1]  # compressed CSV: pyarrow reads it by its extension
    kind = _FORMATS.get(suffixes[-1] if suffixes else "")
    if kind is None:
        raise DataError(f"{path} is not a Parquet (.parquet, .pq) or CSV (.csv, .tsv, optionally .gz) file")
    if kind == "parquet":
        # Pages read through a 1 MiB buffer, not whole column chunks read ahead ("pre-buffering", which
        # helps on object stores): bounded memory, and on a local disk a scan in a third of the CPU time.
        return ds.ParquetFileFormat(
            default_fragment_scan_options=ds.ParquetFragmentScanOptions(
                pre_buffer=False, use_buffered_stream=True, buffer_size=1 << 20
            )
        )
    # The labels are read as text. Left to itself, pyarrow infers a column's type from the values of the
    # file's first block: a private label would decide it, and a later label that does not fit it would
    # fail the read with an error quoting it.
    return ds.CsvFileFormat(
        parse_options=pa_csv.ParseOptions(delimiter="\t" if kind == "tsv" else ","),
        convert_options=pa_csv.ConvertOptions(column_types={label_column: pa.string()}),
    )


def _is_csv(dataset: ds.Dataset) -> bool:
    return isinstance(getattr(dataset, "format", None), ds.CsvFileFormat)


@contextlib.contextmanager
def _reading(where: str, csv: bool) -> Iterator[None]:
    """pyarrow's read errors as DataErrors. A CSV reader's message can quote a row, its label
    included, so it is withheld; a Parquet reader's is kept."""
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
    """The needed columns' types, from the first file (dictionary-encoded columns as their values);
    later files' ids and priors are cast to them, their labels never (:func:`read_batches`).

    Parameters
    ----------
    datasets : list of pyarrow.dataset.Dataset
        The source's datasets (:func:`open_source`).
    columns : list of str
        The needed columns.

    Returns
    -------
    pyarrow.Schema
        The columns, in the order given, with the first file's types.

    Raises
    ------
    labeldp.errors.DataError
        If a file lacks one of the columns.
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


def released_type(datasets: list[ds.Dataset], label_type: pa.DataType) -> pa.DataType:
    """The type of ``released_label``, never a function of a label value: the label column's
    declared type (the first file's Parquet schema, an in-memory table's), or string when any file
    is CSV, which declares no types (its labels are read as text).

    Parameters
    ----------
    datasets : list of pyarrow.dataset.Dataset
        The source's datasets.
    label_type : pyarrow.DataType
        The label column's type in the source's schema (:func:`source_schema`).

    Returns
    -------
    pyarrow.DataType
        ``label_type``, or ``pyarrow.string()`` when a file is CSV.
    """
    return pa.string() if any(_is_csv(dataset) for dataset in datasets) else label_type


def _describe(dataset: ds.Dataset) -> str:
    files = getattr(dataset, "files", None)
    return files[0] if files else "the table"


def read_batches(
    datasets: list[ds.Dataset], schema: pa.Schema, label_column: str | None = None
) -> Iterator[pa.RecordBatch]:
    """Record batches of the columns in ``schema``, file after file, each batch in file order;
    the read-ahead is bounded (a few batches of at most ``_READ_ROWS`` rows). Every column but
    ``label_column`` is cast to ``schema``'s type: each file's labels keep their own type and are
    matched to the classes as text (a cast would fail on a label that does not fit, and quote it).

    Parameters
    ----------
    datasets : list of pyarrow.dataset.Dataset
        The source's datasets, read in order.
    schema : pyarrow.Schema
        The columns to read and their types.
    label_column : str or None, optional
        The column left in each file's own type (default None: every column is cast).

    Yields
    ------
    pyarrow.RecordBatch
        Non-empty batches of the columns in ``schema``, in file order.

    Raises
    ------
    labeldp.errors.DataError
        If a file cannot be read (a CSV reader's message withheld), or a column other than the labels
        cannot be cast to the first file's type.
    """
    for dataset in datasets:
        with _reading(_describe(dataset), _is_csv(dataset)):
            for batch in dataset.to_batches(
                columns=schema.names, batch_size=_READ_ROWS, batch_readahead=2, fragment_readahead=1
            ):
                if batch.num_rows:
                    yield _conformed(batch, schema, label_column, dataset)


def _conformed(
    batch: pa.RecordBatch, schema: pa.Schema, label_column: str | None, dataset: ds.Dataset
) -> pa.RecordBatch:
    """``batch`` with its columns but the label column cast to ``schema``'s types (public columns:
    an error may quote their values)."""
    if batch.schema == schema:
        return batch
    columns = []
    for field, column in zip(schema, batch.columns):
        if field.name != label_column and column.type != field.type:
            try:
                column = column.cast(field.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
                raise DataError(
                    f"{_describe(dataset)}: column {field.name!r} does not have the first file's type "
                    f"{field.type} ({error})"
                ) from None
        columns.append(column)
    return pa.RecordBatch.from_arrays(columns, names=schema.names)


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
    """Read the label and id columns once: every label must be one of the classes (the error says
    neither which nor how many are not), every id present and distinct (without an id column, the
    rows' positions are); RR-with-prior's prior columns, each row a probability distribution; and the
    privacy unit column, every row's unit present. Returns the number of rows and each row's unit key.

    The ids are checked with 8 bytes a row: each row's 64-bit key (:func:`_id_keys`).

    Reads the true labels to check them against the classes, and releases nothing: only the number of
    rows comes back, and an error says neither which labels nor how many are refused.

    Parameters
    ----------
    datasets : list of pyarrow.dataset.Dataset
        The source's datasets.
    schema : pyarrow.Schema
        The source's columns (:func:`source_schema`), the label and id columns among them.
    domain : LabelDomain
        The declared classes.
    label_column : str
        The label column.
    id_column : str or None
        The id column, or None (the rows' positions are the ids).
    described : str
        The source in words, for the error messages.
    prior_columns : tuple of str or None, optional
        RR-with-prior's prior columns, one per class (public), or None.
    unit_column : str or None, optional
        The privacy unit column (public), or None.

    Returns
    -------
    rows : int
        The number of rows.
    unit_keys : numpy.ndarray or None
        (rows,) int64, each row's unit as a 64-bit key (an integer unit itself, any other its hash:
        equal units, equal keys); None without ``unit_column``.

    Raises
    ------
    labeldp.errors.DataError
        If a label is missing or outside the classes, an id, a unit or a prior value is missing, an id is
        duplicated (the message names it: ids are public), the source holds no rows, or it cannot be read.
    labeldp.errors.ConfigError
        If a prior row is not a probability distribution.
    """
    where = f"label column {label_column!r}"
    keys: list[np.ndarray] = []
    prior_columns = tuple(prior_columns or ())
    units: list[np.ndarray] = []
    ids = [schema.field(id_column)] if id_column is not None else []
    unit = [schema.field(unit_column)] if unit_column is not None else []
    fields = [schema.field(label_column), *ids, *unit, *(schema.field(name) for name in prior_columns)]
    rows = 0
    for batch in read_batches(datasets, pa.schema(fields), label_column):
        arrow_positions(domain, batch.column(0), where)
        rows += batch.num_rows
        if prior_columns:  # public: checked before anything is drawn, not block by block while drawing
            _check_prior_rows(batch, prior_columns)
        if unit_column is not None:
            if batch.column(unit_column).null_count:
                raise DataError(f"privacy unit column {unit_column!r} has missing values: every row needs its unit")
            units.append(_id_keys(batch.column(unit_column)))
        if id_column is None:
            continue
        if batch.column(1).null_count:
            raise DataError(f"id column {id_column!r} has missing values")
        keys.append(_id_keys(batch.column(1)))
    if rows == 0:
        raise DataError(f"{described} has no rows")
    if id_column is not None:
        _refuse_duplicated_ids(datasets, schema.field(id_column), _joined(keys))
    return rows, _joined(units) if unit_column is not None else None


def _check_prior_rows(batch: pa.RecordBatch, prior_columns: tuple[str, ...]) -> None:
    """The prior columns of a batch: no missing value, and each row a probability distribution over
    the classes (:func:`labeldp._validation.check_priors`)."""
    for name in prior_columns:
        if batch.column(name).null_count:
            raise DataError(f"prior column {name!r} has missing values")
    check_priors(np.column_stack([batch.column(name).to_numpy(zero_copy_only=False) for name in prior_columns]))


def _id_keys(ids: pa.Array) -> np.ndarray:
    """Each id as a 64-bit key (int64): an integer id itself (uint64 wraps around, still one to one),
    any other id its hash."""
    if pa.types.is_integer(ids.type):
        return ids.to_numpy(zero_copy_only=False).astype(np.int64)
    return _hash_ids(ids)


def _hash_ids(ids: pa.Array) -> np.ndarray:
    """64-bit hashes of ids (pandas' ``hash_array``, one vectorised call), as int64."""
    return pd.util.hash_array(ids.to_numpy(zero_copy_only=False), categorize=False).view(np.int64)


def _joined(chunks: list[np.ndarray]) -> np.ndarray:
    """The chunks as one int64 array, each chunk freed once copied: the peak is about the total, not
    twice it. Empties ``chunks``."""
    joined = np.empty(sum(chunk.size for chunk in chunks), dtype=np.int64)
    stop = joined.size
    while chunks:
        chunk = chunks.pop()
        joined[stop - chunk.size : stop] = chunk
        stop -= chunk.size
    return joined


def _refuse_duplicated_ids(datasets: list[ds.Dataset], field: pa.Field, keys: np.ndarray) -> None:
    """Refuse a table in which an id occurs twice, from every row's key (sorted here, in place).
    Integer keys are the ids: a repeated key is a repeated id. Other keys are hashes: the ids of the
    repeated ones are compared exactly (:func:`_duplicated_id`), so that a collision never refuses a
    valid table."""
    keys.sort()
    repeated = keys[1:][keys[1:] == keys[:-1]]
    if not repeated.size:
        return
    if pa.types.is_integer(field.type):
        example = repeated[:1].astype(field.type.to_pandas_dtype())[0]  # back from int64 (uint64 wraps back)
    else:
        example = _duplicated_id(datasets, field, np.unique(repeated))
        if example is None:
            return
    raise duplicated_ids_error(f"id column {field.name!r}", example)


def _duplicated_id(datasets: list[ds.Dataset], field: pa.Field, hashes: np.ndarray) -> Any:
    """An id that occurs twice among the rows whose id hash is in ``hashes`` (sorted, distinct), or
    None: the hash collisions compared exactly. One scan of the id column per ``_COLLISIONS_PER_SCAN``
    hashes (a valid table has almost never any; in a table with a duplicated id the first scan finds
    one), keeping the distinct ids of those hashes met so far, and stopping at the first repeat."""
    for start in range(0, hashes.size, _COLLISIONS_PER_SCAN):
        chosen = hashes[start : start + _COLLISIONS_PER_SCAN]
        met = pa.array([], type=field.type)
        for batch in read_batches(datasets, pa.schema([field])):
            ids = batch.column(0)
            found = ids.filter(pa.array(np.isin(_hash_ids(ids), chosen)))
            if not len(found):
                continue
            met = pa.concat_arrays([met, found])
            counts = pc.value_counts(met)
            repeated = counts.field("values").filter(pc.greater(counts.field("counts"), 1))
            if len(repeated):
                return repeated[0].as_py()
    return None


def kept_batches(
    batches: Iterator[pa.RecordBatch], kept: np.ndarray, position_column: str | None
) -> Iterator[pa.RecordBatch]:
    """The rows of ``batches`` that ``kept`` keeps (a privacy unit's rows within its bound), each
    with its position in the stream as the column ``position_column`` (int64, from 0) where given.

    Parameters
    ----------
    batches : iterator of pyarrow.RecordBatch
        The source's batches (:func:`read_batches`), every row of it.
    kept : numpy.ndarray
        (rows,) boolean: whether each row of the stream is kept (decided from public columns only).
    position_column : str or None
        The name of the column of positions to append, or None.

    Yields
    ------
    pyarrow.RecordBatch
        The kept rows of each batch (batches keeping none are skipped).

    Raises
    ------
    labeldp.errors.DataError
        If the stream holds more rows than ``kept`` (the source changed since the first pass).
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
    """``rows`` consecutive rows of the table, ready for the mechanism: the ids (Arrow), the labels'
    class positions and the prior rows (float64, each class a contiguous column, which is how
    RR-with-prior reads them). The arrays are views of buffers reused by the next block."""

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
    """The stream cut into blocks of exactly ``rows`` rows (the last one shorter), whatever the
    batches' sizes, so that the draws do not depend on how the files are cut. Each batch is
    converted straight into buffers allocated once: memory stays that of one block. Without an
    ``id_column`` the ids are the rows' positions in the stream (int64, from 0).

    Reads the true labels (as class positions) for the draws, and releases nothing: each block is
    released by :class:`~labeldp.boundary.column.Draws`.

    Parameters
    ----------
    batches : iterator of pyarrow.RecordBatch
        The source's batches (:func:`read_batches`).
    rows : int
        The rows of a block (``batch_rows``).
    domain : LabelDomain
        The declared classes.
    label_column : str
        The label column.
    id_column : str or None
        The id column, or None for the rows' positions.
    prior_columns : tuple of str or None
        RR-with-prior's prior columns, one per class, or None.

    Yields
    ------
    _Block
        ``rows`` consecutive rows (the last block shorter): their ids, the labels' class positions and
        the prior rows (float64, or None). Its arrays are reused by the next block.

    Raises
    ------
    labeldp.errors.DataError
        If a label is missing or outside the classes, or an id or a prior value is missing.
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
