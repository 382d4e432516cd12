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

**Each row once.** Ids and privacy units are read as text from CSV files, each file's in its own
type, and compared by their canonical spelling (:mod:`labeldp.boundary.keys`: ``17`` in a Parquet file
and ``"17"`` in a CSV file are one person). The first pass keeps a 64-bit key a row; where keys repeat,
a further scan compares the ids exactly, so that a hash collision never refuses a valid table, and a
duplicated id is refused naming it (ids are public). Without ids or units a source of several files
(where a stray copy, ``events.csv`` beside ``events.parquet``, would hold each row twice) is refused
unless the user states that each row is a different person (:func:`check_each_row_once`).
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


def open_source(source, text_columns: str | Sequence[str | None]) -> tuple[list[ds.Dataset], str]:
    """The source as datasets to scan in order, and a description of it.

    Parameters
    ----------
    source : str or os.PathLike or pyarrow.Table or pyarrow.dataset.Dataset or pandas.DataFrame
        A Parquet or CSV file, a folder of them (data files in the order of their sorted paths; names
        starting with ``.`` or ``_`` are skipped), an Arrow table or dataset, or a DataFrame.
    text_columns : str or sequence of str
        The label, id and unit columns, read as text from CSV files (and from a DataFrame's columns of
        objects); None entries are ignored.

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
    text_columns = [text_columns] if isinstance(text_columns, str) else [c for c in text_columns if c]
    if isinstance(source, pd.DataFrame):
        return [ds.dataset(_frame_table(source, text_columns))], "an in-memory table"
    if isinstance(source, pa.Table):
        return [ds.dataset(source)], "an in-memory table"
    if isinstance(source, ds.Dataset):
        return [source], "a pyarrow dataset"
    return [_open(f, text_columns) for f in data_files(source)], str(source)


def data_files(source) -> list[Path]:
    """The data files of a file or folder, in the order they are read: a folder's in the order of
    their sorted paths, names starting with ``.`` or ``_`` skipped (``.crc``, ``_SUCCESS``, ``_metadata``
    are not data, as for pyarrow and Spark).

    Raises
    ------
    labeldp.errors.MissingFileError
        If the path does not exist.
    labeldp.errors.DataError
        If a folder holds no data files.
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
    """Refuse a source of several files without ids or privacy units, unless the user states that each
    row is a different person: a row held twice (a stray copy, ``events.csv`` beside
    ``events.parquet``) would be released twice under a ledger showing one release. With ids,
    duplicates are caught (:func:`check_rows`); with units, a unit's rows are bounded however often
    they occur. A single file is taken as holding each person once: rows are never refused for having
    equal public columns."""
    if files > 1 and id_column is None and unit_column is None and not one_row_per_person:
        raise DataError(
            f"{described} holds {files} data files and no id column: a row held in two of them (a stray copy, "
            "events.csv beside events.parquet) would be released twice under a ledger that shows one release. "
            "Name an id column (--id-column, id_column=) so that duplicated rows are refused, or a privacy unit "
            "(--privacy-unit), or state that every row is a different person (--one-row-per-person, "
            "one_row_per_person=True)"
        )


def _frame_table(frame: pd.DataFrame, text_columns: list[str]) -> pa.Table:
    """A DataFrame as an Arrow table. Text columns of Python objects become text first: Arrow would
    infer their type from the values, and quote the first one that does not fit it."""
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
    """``"parquet"``, ``"csv"`` or ``"tsv"``, from a data file's suffixes (``.gz`` or ``.bz2`` may
    follow a CSV's).

    Raises
    ------
    labeldp.errors.DataError
        If the suffix is not a table's.
    """
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


def released_type(datasets: list[ds.Dataset], domain: LabelDomain) -> pa.DataType:
    """The type of ``released_label``: a function of the declared classes and of whether a file is CSV,
    never of a label value, nor of a column type that pandas may have guessed from the labels: int64
    where every class is a whole number, float64 where every class is a number, else string (and string
    whenever a file is CSV, which declares no types: its labels are read as text)."""
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
    """Record batches of the columns in ``schema``, file after file, each batch in file order;
    the read-ahead is bounded (a few batches of at most ``_READ_ROWS`` rows). Every column but
    ``label_column`` (the label, or the label and unit columns) is cast to ``schema``'s type: each
    file's labels and units keep their own type and are matched as text (a cast would fail on a label
    that does not fit, and quote it; a unit ``"anonymous"`` cannot be cast to the first file's integers).

    Parameters
    ----------
    datasets : list of pyarrow.dataset.Dataset
        The source's datasets, read in order.
    schema : pyarrow.Schema
        The columns to read and their types.
    label_column : str or sequence of str or None, optional
        The columns left in each file's own type (default None: every column is cast).

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
    own = {label_column} if isinstance(label_column, str) else {c for c in label_column or () if c}
    for dataset in datasets:
        with _reading(_describe(dataset), _is_csv(dataset)):
            for batch in dataset.to_batches(
                columns=schema.names, batch_size=_READ_ROWS, batch_readahead=2, fragment_readahead=1
            ):
                if batch.num_rows:
                    yield _conformed(batch, schema, own, dataset)


def _conformed(batch: pa.RecordBatch, schema: pa.Schema, own: set[str], dataset: ds.Dataset) -> pa.RecordBatch:
    """``batch`` with its columns but ``own`` cast to ``schema``'s types (public columns: an error may
    quote their values)."""
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
    matching them to the declared domain (:func:`arrow_positions`) reads them, and wraps the result at once.
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
    """Read a whole table's label, id and unit columns into memory, as :func:`check_rows` reads them
    for a release: the labels as text from CSV, never by guessing; ids and units in each file's own
    type, compared by their canonical spelling; a duplicated id refused, naming it; a source of several
    files without ids or units refused unless ``one_row_per_person`` (:func:`check_each_row_once`).

    Reads the true labels into memory and releases nothing: the caller wraps them as private labels.

    Raises
    ------
    labeldp.errors.MissingFileError
        If the source does not exist.
    labeldp.errors.DataError
        If it cannot be read, lacks a column or holds no rows, an id or unit is missing, or an id is
        duplicated.
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
    """Read the label and id columns once: every label must be one of the classes (the error says
    neither which nor how many are not), every id present and distinct (without an id column, the
    rows' positions are); RR-with-prior's prior columns, each row a probability distribution; and the
    privacy unit column, every row's unit present. Returns the number of rows and each row's unit key.

    The ids are checked with 8 bytes a row: each row's 64-bit key (:func:`~labeldp.boundary.keys.row_keys`).

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
    """The prior columns of a batch: no missing value, and each row a probability distribution over
    the classes (:func:`labeldp._validation.check_priors`)."""
    for name in prior_columns:
        if batch.column(name).null_count:
            raise DataError(f"prior column {name!r} has missing values")
    check_priors(np.column_stack([batch.column(name).to_numpy(zero_copy_only=False) for name in prior_columns]))


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


def _unit_missing(column: str) -> str:
    return f"privacy unit column {column!r} has missing values: every row needs its unit"


def _refuse_duplicated_ids(
    datasets: list[ds.Dataset], field: pa.Field, keys: np.ndarray, own_types: bool = False
) -> None:
    """Refuse a table in which an id occurs twice, from every row's key (sorted here, in place): where
    keys repeat, a scan of the id column compares the ids of those keys by their canonical spelling,
    so that a hash collision never refuses a valid table."""
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
