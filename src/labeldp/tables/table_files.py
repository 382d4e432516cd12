"""A table's files: a file or folder found and opened as datasets in reading order (the label, id and unit
columns read as text from CSV, as :mod:`labeldp.boundary.table_source` says why), the columns' types, and the
type ``released_label`` is written in, with the declared classes in it.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.dataset as ds

from labeldp.errors import ConfigError, DataError, MissingFileError
from labeldp.tables.frames import arrow_of
from labeldp.tables.keys import canonical_label

_FORMATS = {".parquet": "parquet", ".pq": "parquet", ".parq": "parquet", ".csv": "csv", ".txt": "csv", ".tsv": "tsv"}


def open_source(source, text_columns: str | Sequence[str | None]) -> tuple[list[ds.Dataset], str]:
    """The source as datasets to scan in order (one per file), and its description in words.

    ``source`` is a Parquet or CSV file, a folder of them (:func:`data_files`), an Arrow table or dataset, or
    a DataFrame; ``text_columns`` (the label, id and unit columns) are read as text from CSV files and from a
    DataFrame's object columns.
    """
    as_text = [text_columns] if isinstance(text_columns, str) else [c for c in text_columns if c]
    if isinstance(source, pd.DataFrame):
        return [ds.dataset(arrow_of(source, as_text))], "an in-memory table"
    if isinstance(source, pa.Table):
        return [ds.dataset(source)], "an in-memory table"
    if isinstance(source, ds.Dataset):
        return [source], "a pyarrow dataset"
    return [_open(f, as_text) for f in data_files(source)], str(source)


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
    showing one release. With ids, duplicates are caught (:func:`~labeldp.boundary.table_source.check_rows`);
    with units, a unit's rows are bounded however often they occur. A single file is taken as holding each
    person once: rows are never refused for having equal public columns.
    """
    if files > 1 and id_column is None and unit_column is None and not one_row_per_person:
        raise DataError(
            f"{described} holds {files} data files and no id column: a row held in two of them (a stray copy, "
            "events.csv beside events.parquet) would be released twice under a ledger that shows one release. "
            "Name an id column (--id-column, id_column=) so that duplicated rows are refused, or a privacy unit "
            "(--privacy-unit), or state that every row is a different person (--one-row-per-person, "
            "one_row_per_person=True)"
        )


def _open(path: Path, text_columns: list[str]) -> ds.Dataset:
    file_format = _file_format(path, text_columns)
    with reading(str(path), isinstance(file_format, ds.CsvFileFormat)):  # CSV: reads the first block
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


def is_csv(dataset: ds.Dataset) -> bool:
    return isinstance(getattr(dataset, "format", None), ds.CsvFileFormat)


@contextlib.contextmanager
def reading(where: str, csv: bool) -> Iterator[None]:
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
    and priors are cast to them, their labels never (:func:`~labeldp.tables.table_batches.read_batches`).
    """
    for dataset in datasets:
        missing = [c for c in columns if c not in dataset.schema.names]
        if missing:
            raise DataError(
                f"columns {missing} not found in {describe_dataset(dataset)}; its columns are {dataset.schema.names}"
            )
    fields = [datasets[0].schema.field(c) for c in columns]
    return pa.schema(
        [field.with_type(field.type.value_type) if pa.types.is_dictionary(field.type) else field for field in fields]
    )


def released_type(datasets: list[ds.Dataset], classes: Sequence[Any]) -> pa.DataType:
    """The type of ``released_label``, from the declared classes and whether a file is CSV, never from a label
    value or a type pandas guessed from them: int64 where every class is a whole number, float64 where every
    class is a number, else string (always string with a CSV file, whose labels are read as text).
    """
    if any(is_csv(dataset) for dataset in datasets):
        return pa.string()
    spellings = [canonical_label(declared) for declared in classes]
    if all(re.fullmatch(r"-?\d+", s) and -(1 << 63) <= int(s) < (1 << 63) for s in spellings):
        return pa.int64()
    if all(_is_number(s) for s in spellings):
        return pa.float64()
    return pa.string()


def arrow_class_values(classes: Sequence[Any], value_type: pa.DataType, column: str) -> pa.Array:
    """The declared classes as an Arrow array of ``value_type``, the type ``released_label`` is written in."""
    values = []
    for declared in classes:
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


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def describe_dataset(dataset: ds.Dataset) -> str:
    files = getattr(dataset, "files", None)
    return files[0] if files else "the table"
