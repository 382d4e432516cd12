"""Tables (CSV or Parquet): numeric feature columns and one label column."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from labeldp.data.dataset import LabeledDataset


def _read(path: Path) -> pd.DataFrame:
    if not path.exists():
        raise FileNotFoundError(f"table file {path} does not exist")
    if path.suffix.lower() in (".parquet", ".pq"):
        return pd.read_parquet(path)
    if path.suffix.lower() in (".csv", ".gz", ".txt", ".tsv"):
        return pd.read_csv(path, sep="\t" if path.suffix.lower() == ".tsv" else ",")
    raise ValueError(f"table file {path} must be .csv, .tsv or .parquet")


def load_table_dataset(path: str | Path, label_column: str, test_path: str | Path | None = None,
                       test_fraction: float = 0.2, seed: int = 0,
                       feature_columns: list[str] | None = None) -> LabeledDataset:
    """Load a table; features are standardised with training statistics.

    Labels may be integers or strings; either way they are mapped to 0..K-1 in sorted order of the
    distinct values found in the training part (``class_names`` keeps the originals). Without
    ``test_path``, a random ``test_fraction`` of the rows (fixed by ``seed``) becomes the test set.
    """
    frame = _read(Path(path))
    if label_column not in frame.columns:
        raise ValueError(f"label column {label_column!r} not found; columns are {list(frame.columns)}")
    if test_path is None:
        if not 0.0 < test_fraction < 1.0:
            raise ValueError(f"test_fraction must lie in (0, 1), got {test_fraction}")
        order = np.random.default_rng(seed).permutation(len(frame))
        n_test = max(1, int(round(test_fraction * len(frame))))
        train, test = frame.iloc[order[n_test:]], frame.iloc[order[:n_test]]
    else:
        train, test = frame, _read(Path(test_path))
    features = feature_columns or [c for c in frame.columns if c != label_column]
    missing = [c for c in features + [label_column] if c not in test.columns]
    if missing:
        raise ValueError(f"test table lacks columns {missing}")
    non_numeric = [c for c in features if not pd.api.types.is_numeric_dtype(frame[c])]
    if non_numeric:
        raise ValueError(f"feature columns must be numeric; encode these first: {non_numeric}")
    if train[label_column].isna().any() or test[label_column].isna().any():
        raise ValueError(f"label column {label_column!r} has missing values")
    classes = np.sort(train[label_column].unique())
    lookup = {value: index for index, value in enumerate(classes)}
    unknown = set(test[label_column].unique()) - set(lookup)
    if unknown:
        raise ValueError(f"test labels {sorted(map(str, unknown))[:5]} do not occur in the training part")
    x_train = train[features].to_numpy(np.float64)
    x_test = test[features].to_numpy(np.float64)
    if not (np.isfinite(x_train).all() and np.isfinite(x_test).all()):
        raise ValueError("feature columns contain NaN or infinite values")
    mean, std = x_train.mean(axis=0), x_train.std(axis=0) + 1e-8
    return LabeledDataset(Path(path).stem, (x_train - mean) / std, train[label_column].map(lookup).to_numpy(),
                          (x_test - mean) / std, test[label_column].map(lookup).to_numpy(),
                          num_classes=max(len(classes), 2), class_names=[str(c) for c in classes])
