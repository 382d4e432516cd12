"""labeldp's own datasets, which the registry adds first: the embedded digits, the MNIST family and CIFAR from
their standard files, MovieLens 100K's folder, and a table of the user's own (``csv``)."""

from __future__ import annotations

from pathlib import Path

from labeldp.data.dataset_spec import Dataset, DatasetRequest

_IDX = "the four standard IDX files (.gz or not)"


def load_digits(request: DatasetRequest):
    """The loader of ``digits``, scikit-learn's embedded 8x8 digits; reads nothing of ``request``."""
    from labeldp.data.digits import load_digits_dataset

    return load_digits_dataset()


def _data_dir(request: DatasetRequest) -> Path:
    """The folder of a dataset's standard files (:func:`~labeldp.data.loading.load_dataset` refuses none)."""
    assert request.data_dir is not None, "a folder dataset is loaded from its folder"
    return request.data_dir


def _idx(name: str):
    def load(request: DatasetRequest):
        from labeldp.data.idx import load_idx_dataset

        return load_idx_dataset(name, _data_dir(request))

    def download(data_dir):
        from labeldp.data.idx import download_idx

        download_idx(name, data_dir)

    return load, download


def _cifar(num_classes: int):
    def load(request: DatasetRequest):
        from labeldp.data.cifar import load_cifar_dataset

        return load_cifar_dataset(num_classes, _data_dir(request))

    def download(data_dir):
        from labeldp.data.cifar import download_cifar

        download_cifar(num_classes, data_dir)

    return load, download


def load_movielens(request: DatasetRequest):
    """The loader of ``movielens``: MovieLens 100K from ``request.data_dir``
    (:func:`labeldp.data.movielens.load_movielens_dataset`).
    """
    from labeldp.data.movielens import load_movielens_dataset

    return load_movielens_dataset(_data_dir(request), request.split_seed, request.test_fraction, request.public_test)


def load_table(request: DatasetRequest):
    """The loader of ``csv``, the user's table (:func:`labeldp.data.table.load_table_dataset`)."""
    from labeldp.data.table import load_table_dataset

    return load_table_dataset(request.table_options, request.test_fraction, request.split_seed, request.public_test)


def _folder(name: str, loaders: tuple, help: str) -> Dataset:
    load, download = loaders
    return Dataset(name, "folder", load, download, help=help)


#: labeldp's own datasets, in the order the command line lists them
BUILTIN_DATASETS = (
    Dataset("digits", "embedded", load_digits, help="scikit-learn's 8x8 digits, embedded"),
    *(_folder(name, _idx(name), _IDX) for name in ("mnist", "fashion-mnist", "kmnist")),
    *(_folder(f"cifar{k}", _cifar(k), "the python pickle batches") for k in (10, 100)),
    Dataset(
        "movielens",
        "folder",
        load_movielens,
        "labeldp.data.movielens:download_movielens",
        held_out_test=True,
        help="MovieLens 100K's GroupLens folder: ratings 1..5",
    ),
    Dataset("csv", "table", load_table, help="a CSV or Parquet table (--table)"),
)
