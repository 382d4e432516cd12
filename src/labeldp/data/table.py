"""Tables (CSV or Parquet): numeric feature columns and one label column."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from labeldp._validation import canonical_label as _canonical
from labeldp.data.dataset import LabeledDataset
from labeldp.errors import ConfigError, DataError, MissingFileError
from labeldp.randomness import public_rng


def _read(path: Path) -> pd.DataFrame:
    if not path.exists():
        raise MissingFileError(f"table file {path} does not exist")
    if path.suffix.lower() in (".parquet", ".pq"):
        return pd.read_parquet(path)
    if path.suffix.lower() in (".csv", ".gz", ".txt", ".tsv"):
        return pd.read_csv(path, sep="\t" if path.suffix.lower() == ".tsv" else ",")
    raise DataError(f"table file {path} must be .csv, .tsv or .parquet")


def label_indices(values: pd.Series, classes: tuple[str, ...], where: str) -> np.ndarray:
    """The position of each label value in the declared ``classes``; a value outside them, or a missing
    one, is an error (raised before anything is released)."""
    if values.isna().any():
        raise DataError(f"the label column of the {where} has {int(values.isna().sum())} missing values")
    lookup = {_canonical(c): index for index, c in enumerate(classes)}
    canonical = values.map(_canonical)
    if not canonical.isin(list(lookup)).all():  # which labels, and how many, is private: neither is printed
        raise DataError(f"the {where} has labels outside the declared classes {list(classes)}; declare every "
                        "label value with --classes (classes=...)")
    return canonical.map(lookup).to_numpy(np.int64)


def load_table_dataset(path: str | Path, label_column: str, test_path: str | Path | None = None,
                       test_fraction: float = 0.2, seed: int = 0,
                       feature_columns: list[str] | None = None, classes: tuple[str, ...] | None = None
                       ) -> LabeledDataset:
    """Load a table; features are standardised with training statistics.

    ``classes`` is the label domain, in order: public, declared by the user, never read off the
    private labels (whose distinct values, K, and the model's output size would otherwise depend on
    them). Label values are matched to it as text (``1``, ``1.0`` and ``true`` are one value).
    Without ``test_path``, a random ``test_fraction`` of the rows (fixed by ``seed``) becomes the test set.
    """
    if classes is None or len(classes) < 2:
        raise ConfigError("a table's label domain must be declared: --classes V1 V2 ... (classes=...), the "
                          "label values in order; it is public and never taken from the private labels")
    frame = _read(Path(path))
    if label_column not in frame.columns:
        raise DataError(f"label column {label_column!r} not found; columns are {list(frame.columns)}")
    if test_path is None:
        if not 0.0 < test_fraction < 1.0:
            raise DataError(f"test_fraction must lie in (0, 1), got {test_fraction}")
        order = public_rng(seed, "table-split").permutation(len(frame))
        n_test = max(1, int(round(test_fraction * len(frame))))
        train, test = frame.iloc[order[n_test:]], frame.iloc[order[:n_test]]
    else:
        train, test = frame, _read(Path(test_path))
    features = feature_columns or [c for c in frame.columns if c != label_column]
    missing = [c for c in features + [label_column] if c not in test.columns]
    if missing:
        raise DataError(f"test table lacks columns {missing}")
    non_numeric = [c for c in features if not pd.api.types.is_numeric_dtype(frame[c])]
    if non_numeric:
        raise DataError(f"feature columns must be numeric; encode these first: {non_numeric}")
    y_train = label_indices(train[label_column], classes, "training table")
    y_test = label_indices(test[label_column], classes, "test table")
    x_train = train[features].to_numpy(np.float64)
    x_test = test[features].to_numpy(np.float64)
    if not (np.isfinite(x_train).all() and np.isfinite(x_test).all()):
        raise DataError("feature columns contain NaN or infinite values")
    mean, std = x_train.mean(axis=0), x_train.std(axis=0) + 1e-8
    return LabeledDataset(Path(path).stem, (x_train - mean) / std, y_train, (x_test - mean) / std, y_test,
                          num_classes=len(classes), class_names=[str(c) for c in classes])
