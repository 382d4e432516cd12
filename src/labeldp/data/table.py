"""Tables as they come (CSV, TSV or Parquet, gzipped or not): numeric, categorical and boolean columns,
missing values, a declared label column and domain, optionally a privacy unit column.

The inputs are public, so their encoding (:class:`TablePreprocessor`) is fitted on them freely and saved
beside the model. Which columns are features is the user's to say (``features``, ``drop``,
``id_column``): another outcome (``spend`` beside ``conversion``) would leak the label into the inputs.
The label, id and unit columns are read by the boundary's reader
(:func:`labeldp.boundary.table_source.read_key_columns`); pandas reads the public feature columns only.

**Privacy units.** With ``privacy_unit`` (a user id: public, never a feature) the run's epsilon is each
unit's: at most ``max_rows_per_unit`` rows of a unit are kept, chosen by the public seed
(:func:`~labeldp.boundary.units.bounded_rows`) before the split, and held-out test rows are whole units.
A test table is public (its labels are never released): its rows need no unit.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from sklearn.compose import ColumnTransformer
from sklearn.impute import SimpleImputer
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

from labeldp.accounting.datasets import table_facts
from labeldp.boundary import LabelDomain, PrivateLabels
from labeldp.boundary.table_source import KeyColumns, read_key_columns
from labeldp.boundary.units import bounded_rows, split_by_unit, unit_codes
from labeldp.data.dataset import LabeledDataset, regression_dataset
from labeldp.data.dataset_spec import TableOptions
from labeldp.data.grid import label_grid
from labeldp.errors import ConfigError, DataError
from labeldp.randomness import public_rng
from labeldp.tables.table_batches import column_keys
from labeldp.tables.table_files import data_files, file_kind


def read_table(path: str | Path, columns: list[str] | None = None) -> pd.DataFrame:
    """The public ``columns`` (default all) of a CSV, TSV or Parquet file or folder as a DataFrame, empty
    fields missing. Never pass it a private label column: read those with
    :func:`~labeldp.boundary.table_source.read_key_columns`.
    """
    frames = [_read_file(file, columns) for file in data_files(path)]
    return frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)


def _read_file(path: Path, columns: list[str] | None) -> pd.DataFrame:
    kind = file_kind(path)
    try:
        if kind == "parquet":
            return pd.read_parquet(path, columns=columns)
        return pd.read_csv(
            path,
            sep="\t" if kind == "tsv" else ",",
            skipinitialspace=True,
            usecols=columns,
            low_memory=False,  # one type a column, not one a chunk of rows
        )
    except (ValueError, OSError, pd.errors.ParserError) as error:
        raise DataError(f"cannot read the table {path}: {error}") from None


@dataclass(frozen=True)
class ColumnGroup:
    """The encoded input columns of one feature column of a table (:meth:`TablePreprocessor.column_groups`).

    Parameters
    ----------
    name : str
        The feature column.
    numeric : bool
        Whether it is numeric (standardised) or categorical (one-hot).
    columns : tuple of int
        Its encoded columns: a numeric column's value, then its missing-value indicator if it has one; a
        categorical column's one-hot columns, one per category.
    missing_above : float or None
        With an indicator, the row's value is missing where the standardised indicator is above this.
    """

    name: str
    numeric: bool
    columns: tuple[int, ...]
    missing_above: float | None = None


@dataclass
class TablePreprocessor:
    """The fitted encoding of a table's public feature columns, kept with the model.

    Parameters
    ----------
    features : list of str
        The feature columns, in order.
    transformer : sklearn.compose.ColumnTransformer
        The fitted transformer: numeric columns imputed (median, with missing-value indicators) and
        standardised, the others one-hot encoded.
    """

    features: list[str]
    transformer: ColumnTransformer

    @classmethod
    def fit(cls, frame: pd.DataFrame, features: list[str]) -> TablePreprocessor:
        """Fit the encoding of ``features`` on ``frame``'s rows (public inputs only).

        Numeric columns (booleans excepted) are imputed with their median, given missing-value indicators and
        standardised; the others are read as text, missing values a category of their own, and one-hot encoded
        (categories unseen here ignored later).
        """
        numeric = [
            c for c in features if pd.api.types.is_numeric_dtype(frame[c]) and not pd.api.types.is_bool_dtype(frame[c])
        ]
        other = [c for c in features if c not in numeric]
        transformer = ColumnTransformer(
            [
                (
                    "numeric",
                    make_pipeline(SimpleImputer(strategy="median", add_indicator=True), StandardScaler()),
                    numeric,
                ),
                (
                    "categorical",
                    make_pipeline(
                        SimpleImputer(strategy="constant", fill_value="(missing)"),
                        OneHotEncoder(handle_unknown="ignore", sparse_output=False),
                    ),
                    other,
                ),
            ],
            sparse_threshold=0.0,
            verbose_feature_names_out=False,
        )
        transformer.fit(_as_features(frame, numeric, other))
        return cls(list(features), transformer)

    def transform(self, frame: pd.DataFrame) -> np.ndarray:
        """(n, d) float32 inputs: ``frame``'s rows encoded as the training rows were, one column per
        :attr:`encoded_names`.
        """
        missing = [c for c in self.features if c not in frame.columns]
        if missing:
            raise DataError(f"the table lacks the feature columns {missing}")
        numeric, other = (list(columns) for _, _, columns in self.transformer.transformers_[:2])
        values = self.transformer.transform(_as_features(frame, numeric, other))
        return np.asarray(values, dtype=np.float32)

    def column_groups(self) -> list[ColumnGroup]:
        """The encoded columns of each feature column that has some, numeric ones first, in :meth:`transform`'s
        order (a numeric column missing in every training row has none). Public: it describes the encoding.
        """
        numeric, other = (list(columns) for _, _, columns in self.transformer.transformers_[:2])
        groups = []
        if numeric:
            imputer, scaler = (step for _, step in self.transformer.named_transformers_["numeric"].steps)
            start = self.transformer.output_indices_["numeric"].start
            kept = [c for c, median in zip(numeric, imputer.statistics_) if not np.isnan(median)]
            flagged = [numeric[i] for i in imputer.indicator_.features_] if imputer.indicator_ is not None else []
            for position, column in enumerate(kept):
                if column not in flagged:
                    groups.append(ColumnGroup(column, True, (start + position,)))
                    continue
                j = len(kept) + flagged.index(column)  # the indicators follow the values
                threshold = float((0.5 - scaler.mean_[j]) / scaler.scale_[j])  # between 0 and 1, standardised
                groups.append(ColumnGroup(column, True, (start + position, start + j), threshold))
        if other:
            encoder = self.transformer.named_transformers_["categorical"].steps[-1][1]
            position = self.transformer.output_indices_["categorical"].start
            for column, categories in zip(other, encoder.categories_):
                groups.append(ColumnGroup(column, False, tuple(range(position, position + len(categories)))))
                position += len(categories)
        return groups

    @property
    def encoded_names(self) -> list[str]:
        """The names of the encoded input columns."""
        return list(self.transformer.get_feature_names_out())


def _as_features(frame: pd.DataFrame, numeric: list[str], other: list[str]) -> pd.DataFrame:
    """The feature columns, the non-numeric ones as text (booleans, categories and strings alike)."""
    part = frame[numeric + other].copy()
    for column in other:
        part[column] = part[column].astype(object).map(lambda v: np.nan if pd.isna(v) else str(v))
    return part


def feature_columns(names: list[str], options: TableOptions) -> list[str]:
    """The declared feature columns, or every column but the label, the dropped ones, the id and the privacy
    unit; the label, id or unit declared a feature is refused.
    """
    label_column, features, drop = options.label_column, options.features, options.drop
    keys = [c for c in (options.id_column, options.privacy_unit) if c]
    named = [label_column, *drop, *keys, *(features or ())]
    unknown = [c for c in named if c not in names]
    if unknown:
        raise DataError(f"columns {unknown} are not in the table; its columns are {list(names)}")
    if features:
        overlap = {label_column, *keys} & set(features)
        if overlap:
            raise ConfigError(f"the label, id or privacy unit column cannot be a feature: {sorted(overlap)}")
        return list(features)
    excluded = {label_column, *keys, *drop}
    chosen = [c for c in names if c not in excluded]
    if not chosen:
        raise ConfigError("no feature column is left")
    return chosen


@dataclass(frozen=True)
class TableRows:
    """The public columns of a table whose ``rows`` (positions, in a run's ledger order) hold private labels:
    what the dataset ledgers read a release's people from."""

    path: Path
    columns: tuple[str, ...]
    rows: np.ndarray

    def keys(self, column: str) -> np.ndarray:
        """Each of the rows' key in ``column`` (public)."""
        return column_keys(self.path, column)[self.rows]


def table_name(path: str | Path) -> str:
    """A table's name: its file name before the first dot (``adult-train`` for ``adult-train.csv.gz``)."""
    return Path(path).name.split(".")[0]


def load_table_dataset(
    options: TableOptions, test_fraction: float = 0.2, seed: int = 0, public_test: bool = False
) -> LabeledDataset:
    """Load the table of ``options`` with a declared label domain: a classification's ``classes`` or numeric
    labels' grid (``label_grid`` points over ``label_range``, :mod:`labeldp.data.grid`: values snapped to it,
    raw test values kept), the features encoded by a :class:`TablePreprocessor` fitted on the training rows
    (``dataset.preprocessor``).

    Without a ``test_table`` a random ``test_fraction`` of the rows, drawn from the seed's public stream,
    becomes the test set; its labels stay private (a run estimates its test metrics from a release of them)
    unless ``public_test``, for exact metrics the epsilon does not cover. A ``test_table``'s
    labels are public. ``privacy_unit``, ``max_rows_per_unit`` and ``one_row_per_person`` are as for
    :func:`~labeldp.boundary.release_folder.privatize_table`; with a unit, the dataset carries the private
    rows' ``units`` and the bound's ``unit_bound``.
    """
    if options.table is None:
        raise ConfigError("dataset 'csv' needs a table file (--table PATH)")
    path, label_column, classes = options.table, options.label_column, options.classes
    grid = _grid(options)
    keys = (options.id_column, options.privacy_unit)
    read = read_key_columns(path, label_column, *keys, one_row_per_person=options.one_row_per_person)
    if grid is None and (classes is None or len(classes) < 2):
        raise ConfigError(
            "a table's label domain must be declared: --classes V1 V2 ... (classes=...), the "
            "label values in order, or --label-range LOW HIGH for numbers; it is public and never "
            "taken from the private labels"
        )
    columns = feature_columns(read.columns, options)
    if options.privacy_unit is not None and options.max_rows_per_unit is None:
        raise ConfigError("a privacy unit column needs max_rows_per_unit, the most rows of one unit kept")
    frame = _public_rows(path, columns, read)
    domain = LabelDomain(classes) if classes is not None and grid is None else None  # classes, or a grid
    labels = _labels(read, domain, f"label column {label_column!r}")
    units = bound = None
    kept = np.arange(read.rows)
    if options.privacy_unit is not None:
        assert read.unit_keys is not None and options.max_rows_per_unit is not None  # read with the unit; refused above
        kept, units, bound = _bound_units(read.unit_keys, options.privacy_unit, options.max_rows_per_unit, seed)
        frame, labels = frame.iloc[kept], labels[kept]
    if options.test_table is None:
        train_rows, test_rows = _split(len(frame), path, test_fraction, seed, units)
        train, test = frame.iloc[train_rows], frame.iloc[test_rows]
        y_train, y_test = labels[train_rows], labels[test_rows]
    else:
        test_read = read_key_columns(options.test_table, label_column, one_row_per_person=True)  # public labels
        missing = [c for c in columns if c not in test_read.columns]
        if missing:
            raise DataError(f"the test table lacks columns {missing}")
        train, test, y_train = frame, _public_rows(options.test_table, columns, test_read), labels
        train_rows, test_rows = np.arange(len(frame)), np.arange(0)
        y_test = _labels(test_read, domain, "the test table's label column")
    preprocessor = TablePreprocessor.fit(train, columns)
    name = table_name(path)
    private_test = options.test_table is None and not public_test
    private_rows = np.concatenate([train_rows, test_rows]) if private_test else train_rows
    extra: dict[str, Any] = {
        "preprocessor": preprocessor,
        "facts": table_facts(path, label_column, read.columns, read.rows),
        "table_rows": TableRows(path, tuple(read.columns), kept[private_rows]),
    }
    if units is not None:  # the private rows' units: the training rows', then the private test rows'
        extra.update(units=unit_codes(units[private_rows]), unit_bound=bound)
    x_train, x_test = preprocessor.transform(train), preprocessor.transform(test)
    if grid is not None:
        return regression_dataset(name, x_train, y_train, x_test, y_test, grid, private_test=private_test, **extra)
    assert classes is not None  # refused above without a grid
    return LabeledDataset(
        name,
        x_train,
        PrivateLabels.from_indices(y_train, len(classes)),
        x_test,
        PrivateLabels.from_indices(y_test, len(classes)) if private_test else y_test,
        num_classes=len(classes),
        class_names=[str(c) for c in classes],
        **extra,
    )


def _grid(options: TableOptions) -> np.ndarray | None:
    """Numeric labels' grid, ``label_grid`` points over ``label_range`` (None: classes)."""
    if options.label_range is None:
        if options.label_grid is not None:
            raise ConfigError("--label-grid needs --label-range LOW HIGH")
        return None
    if options.classes is not None:
        raise ConfigError("a table's labels are classes (--classes) or numbers (--label-range), not both")
    return label_grid(*options.label_range, **({} if options.label_grid is None else {"size": options.label_grid}))


def _labels(read: KeyColumns, domain: LabelDomain | None, where: str) -> np.ndarray:
    """The labels read: class positions in ``domain``, or numbers without one (a regression)."""
    return read.numbers(where) if domain is None else read.class_positions(domain, where)


def _public_rows(path, columns: list[str], read: KeyColumns) -> pd.DataFrame:
    """The feature columns of every file of ``path``, read by pandas (public), row for row with the boundary's
    read of the same files.
    """
    frames = [_read_file(file, columns) for file in data_files(path)]
    if [len(f) for f in frames] != read.rows_per_file:
        raise DataError(
            f"{path}: pandas and pyarrow read different numbers of rows ({[len(f) for f in frames]} against "
            f"{read.rows_per_file}); write the table as Parquet, or as a plain CSV"
        )
    return frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)


def _bound_units(keys: np.ndarray, column: str, max_rows: int, seed: int) -> tuple[np.ndarray, np.ndarray, dict]:
    """The rows its privacy units keep (public rule and seed), their unit codes, and the bound's public facts."""
    kept, units, most_rows = bounded_rows(keys, max_rows, seed)
    facts = {
        "column": column,
        "max_rows": int(max_rows),
        "units": int(units.max()) + 1,
        "rows_read": int(keys.size),
        "rows_kept": int(kept.size),
        "most_rows": most_rows,
    }
    return kept, units, facts


def _split(rows: int, path, test_fraction: float, seed: int, units: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """The training and test rows of a table without a test table: a random share of the rows (public stream
    ``table-split``), or with privacy units of the units (``unit-split``).
    """
    if not 0.0 < test_fraction < 1.0:
        raise ConfigError(f"test_fraction must lie in (0, 1), got {test_fraction}")
    if units is not None:
        held = split_by_unit(units, test_fraction, seed)
        if held.all():  # the number of units is public
            raise DataError(
                f"{path} has {int(units.max()) + 1} privacy unit(s): holding out whole units as the test set leaves "
                "none to train on; use a larger table, or a separate --test-table"
            )
        return np.flatnonzero(~held), np.flatnonzero(held)
    order = public_rng(seed, "table-split").permutation(rows)
    n_test = max(1, int(round(test_fraction * rows)))
    if n_test >= rows:  # the number of rows is public
        raise DataError(
            f"{path} has {rows} row(s): holding out {n_test} as the test set leaves none to train on; "
            "use a larger table, or a separate --test-table"
        )
    return order[n_test:], order[:n_test]
