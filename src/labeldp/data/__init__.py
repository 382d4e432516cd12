"""Datasets: public inputs, private training labels and a test set (:mod:`labeldp.data.dataset`), found
by name in :mod:`labeldp.data.dataset_registry`, and loaders for the standard formats. Names are imported on
first use.
"""

from labeldp._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "Dataset": "labeldp.data.dataset_registry",
        "DatasetRequest": "labeldp.data.dataset_registry",
        "LabeledDataset": "labeldp.data.dataset",
        "dataset_names": "labeldp.data.dataset_registry",
        "download_dataset": "labeldp.data.loading",
        "folder_datasets": "labeldp.data.loading",
        "get_dataset": "labeldp.data.dataset_registry",
        "label_grid": "labeldp.data.grid",
        "load_cifar_dataset": "labeldp.data.cifar",
        "load_dataset": "labeldp.data.loading",
        "load_digits_dataset": "labeldp.data.digits",
        "load_idx_dataset": "labeldp.data.idx",
        "load_movielens_dataset": "labeldp.data.movielens",
        "load_table_dataset": "labeldp.data.table",
        "read_idx": "labeldp.data.idx",
        "register_dataset": "labeldp.data.dataset_registry",
        "regression_dataset": "labeldp.data.dataset",
        "snap_to_grid": "labeldp.data.grid",
        "split_stages": "labeldp.data.splits",
    },
)
