"""labeldp's own datasets, registered by name: the embedded digits, the MNIST family and CIFAR from
their standard files, MovieLens 100K's folder, and a table of the user's own (``csv``)."""

from __future__ import annotations

from pathlib import Path

from labeldp.data.dataset_registry import Dataset, DatasetRequest, register_dataset

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

    return load_movielens_dataset(_data_dir(request), request.split_seed, request.test_fraction, request.test_labels)


def load_table(request: DatasetRequest):
    """The loader of ``csv``, the user's table (:func:`labeldp.data.table.load_table_dataset`)."""
    from labeldp.data.table import load_table_dataset

    return load_table_dataset(request.table_options, request.test_fraction, request.split_seed, request.test_labels)


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
