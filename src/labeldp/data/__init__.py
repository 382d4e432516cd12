"""Datasets: public inputs, private training labels, public test set; loaders for standard formats."""

from __future__ import annotations

from pathlib import Path

from labeldp.data.cifar import download_cifar, load_cifar_dataset
from labeldp.data.dataset import LabeledDataset
from labeldp.data.digits import load_digits_dataset
from labeldp.data.idx import download_idx, load_idx_dataset, read_idx
from labeldp.data.movielens import download_movielens, load_movielens_dataset
from labeldp.data.regression import label_grid, regression_dataset, snap_to_grid
from labeldp.data.table import load_table_dataset
from labeldp.errors import ConfigError

#: Names accepted by :func:`load_dataset` and ``labeldp train --dataset``.
DATASETS = ("digits", "mnist", "fashion-mnist", "kmnist", "cifar10", "cifar100", "movielens", "csv")
#: The datasets read from a folder of their standard files (``data_dir``).
FOLDER_DATASETS = ("mnist", "fashion-mnist", "kmnist", "cifar10", "cifar100", "movielens")


def load_dataset(name: str, data_dir: str | Path | None = None, *, table: str | Path | None = None,
                 label_column: str = "label", test_table: str | Path | None = None,
                 classes: tuple[str, ...] | None = None, features: tuple[str, ...] | None = None,
                 drop: tuple[str, ...] = (), id_column: str | None = None, test_fraction: float = 0.2,
                 split_seed: int = 0, label_range: tuple[float, float] | None = None,
                 label_grid_size: int | None = None, public_test_split: bool = False) -> LabeledDataset:
    """Load a dataset by name. ``digits`` is embedded; the others read files from ``data_dir``
    (``csv`` reads ``table``, a CSV or Parquet file: a classification over the declared ``classes``,
    or a regression on the grid of ``label_grid_size`` points over the declared ``label_range``).

    Where the test rows are held out of the private label column (``csv`` without ``test_table``,
    ``movielens``), their labels are private (:class:`~labeldp.boundary.PrivateLabels`) unless
    ``public_test_split`` treats them as public."""
    if name not in DATASETS:
        raise ConfigError(f"unknown dataset {name!r}; choose one of {', '.join(DATASETS)}")
    if name != "csv" and (table is not None or test_table is not None or label_column != "label" or features
                          or drop or id_column):
        raise ConfigError(f"--table, --test-table, --label-column, --features, --drop and --id-column are for dataset "
                          f"'csv', not {name!r}")
    if name not in FOLDER_DATASETS and data_dir is not None:
        source = "is embedded" if name == "digits" else "reads --table"
        raise ConfigError(f"dataset {name!r} {source}: it takes no --data-dir (for a dataset in that folder, name "
                         f"it with --dataset: {', '.join(FOLDER_DATASETS)})")
    if name != "csv" and (label_range is not None or label_grid_size is not None):
        raise ConfigError(f"--label-range and --label-grid declare a table's numeric labels (dataset 'csv'); "
                          f"dataset {name!r} defines its own labels")
    if name == "digits":
        return load_digits_dataset()
    if name == "csv":
        if table is None:
            raise ConfigError("dataset 'csv' needs a table file (--table PATH)")
        if label_range is not None:
            if classes is not None:
                raise ConfigError("a table's labels are classes (--classes) or numbers (--label-range), not both")
            grid = label_grid(*label_range, label_grid_size) if label_grid_size else label_grid(*label_range)
        elif label_grid_size is not None:
            raise ConfigError("--label-grid needs --label-range LOW HIGH")
        else:
            grid = None
        return load_table_dataset(table, label_column, test_table, test_fraction, split_seed, features=features,
                                  drop=drop, id_column=id_column, classes=classes, grid=grid,
                                  public_test_split=public_test_split)
    if data_dir is None:
        raise ConfigError(f"dataset {name!r} needs a data folder (--data-dir DIR)")
    if name == "movielens":
        return load_movielens_dataset(data_dir, split_seed, public_test_split=public_test_split)
    if name.startswith("cifar"):
        return load_cifar_dataset(int(name[5:]), data_dir)
    return load_idx_dataset(name, data_dir)


def download_dataset(name: str, data_dir: str | Path) -> None:
    """Fetch a dataset's standard files into ``data_dir`` (needs internet; not used by tests)."""
    if name.startswith("cifar"):
        download_cifar(int(name[5:]), data_dir)
    elif name in ("mnist", "fashion-mnist", "kmnist"):
        download_idx(name, data_dir)
    elif name == "movielens":
        download_movielens(data_dir)
    else:
        raise ConfigError(f"{name!r} has nothing to download")


__all__ = ["DATASETS", "FOLDER_DATASETS", "LabeledDataset", "download_dataset", "label_grid", "load_cifar_dataset",
           "load_dataset", "load_digits_dataset", "load_idx_dataset", "load_movielens_dataset",
           "load_table_dataset", "read_idx", "regression_dataset", "snap_to_grid"]
