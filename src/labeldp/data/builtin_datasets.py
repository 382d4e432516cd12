"""labeldp's own datasets, registered by name: the embedded digits, the MNIST family and CIFAR from
their standard files, MovieLens 100K's folder, and a table of the user's own (``csv``)."""

from __future__ import annotations

from labeldp.data.dataset_registry import Dataset, DatasetRequest, register_dataset

_IDX = "the four standard IDX files (.gz or not)"


def load_digits(request: DatasetRequest):
    """The loader of ``digits``, scikit-learn's embedded 8x8 digits; reads nothing of ``request``."""
    from labeldp.data.digits import load_digits_dataset

    return load_digits_dataset()


def _idx(name: str):
    def load(request: DatasetRequest):
        from labeldp.data.idx import load_idx_dataset

        return load_idx_dataset(name, request.data_dir)

    def download(data_dir):
        from labeldp.data.idx import download_idx

        download_idx(name, data_dir)

    return load, download


def _cifar(num_classes: int):
    def load(request: DatasetRequest):
        from labeldp.data.cifar import load_cifar_dataset

        return load_cifar_dataset(num_classes, request.data_dir)

    def download(data_dir):
        from labeldp.data.cifar import download_cifar

        download_cifar(num_classes, data_dir)

    return load, download


def load_movielens(request: DatasetRequest):
    """The loader of ``movielens``: MovieLens 100K from ``request.data_dir``
    (:func:`labeldp.data.movielens.load_movielens_dataset`).
    """
    from labeldp.data.movielens import load_movielens_dataset

    return load_movielens_dataset(
        request.data_dir, request.split_seed, request.test_fraction, public_test_split=request.public_test_split
    )


def load_table(request: DatasetRequest):
    """The loader of ``csv``, the user's table (:func:`labeldp.data.table.load_table_dataset`): a classification
    over the declared classes, or a regression on the grid over the declared label range.
    """
    from labeldp.data.grid import label_grid
    from labeldp.data.table import load_table_dataset
    from labeldp.errors import ConfigError

    if request.table is None:
        raise ConfigError("dataset 'csv' needs a table file (--table PATH)")
    grid = None
    if request.label_range is not None:
        if request.classes is not None:
            raise ConfigError("a table's labels are classes (--classes) or numbers (--label-range), not both")
        size = {} if request.label_grid_size is None else {"size": request.label_grid_size}
        grid = label_grid(*request.label_range, **size)
    elif request.label_grid_size is not None:
        raise ConfigError("--label-grid needs --label-range LOW HIGH")
    return load_table_dataset(
        request.table,
        request.label_column,
        request.test_table,
        request.test_fraction,
        request.split_seed,
        features=request.features,
        drop=request.drop,
        id_column=request.id_column,
        classes=request.classes,
        grid=grid,
        public_test_split=request.public_test_split,
        unit_column=request.unit_column,
        max_rows_per_unit=request.max_rows_per_unit,
        one_row_per_person=request.one_row_per_person,
    )


register_dataset(Dataset("digits", "embedded", load_digits, help="scikit-learn's 8x8 digits, embedded"))
for _name in ("mnist", "fashion-mnist", "kmnist"):
    _load, _download = _idx(_name)
    register_dataset(Dataset(_name, "folder", _load, _download, help=_IDX))
for _classes in (10, 100):
    _load, _download = _cifar(_classes)
    register_dataset(Dataset(f"cifar{_classes}", "folder", _load, _download, help="the python pickle batches"))
register_dataset(
    Dataset(
        "movielens",
        "folder",
        load_movielens,
        "labeldp.data.movielens:download_movielens",
        held_out_test=True,
        help="MovieLens 100K's GroupLens folder: ratings 1..5",
    )
)
register_dataset(Dataset("csv", "table", load_table, help="a CSV or Parquet table (--table)"))
