"""Datasets: public inputs, private training labels and a test set (:mod:`labeldp.data.dataset`), found
by name in :mod:`labeldp.data.dataset_registry`, and loaders for the standard formats. Names are imported on
first use.
"""

from typing import TYPE_CHECKING

from labeldp._lazy import lazy_exports

if TYPE_CHECKING:  # the names as a type checker and an IDE see them; imported on first use at run time
    from labeldp.data.cifar import load_cifar_dataset as load_cifar_dataset
    from labeldp.data.dataset import LabeledDataset as LabeledDataset
    from labeldp.data.dataset import regression_dataset as regression_dataset
    from labeldp.data.dataset_registry import dataset_names as dataset_names
    from labeldp.data.dataset_registry import get_dataset as get_dataset
    from labeldp.data.dataset_registry import register_dataset as register_dataset
    from labeldp.data.dataset_spec import Dataset as Dataset
    from labeldp.data.dataset_spec import DatasetRequest as DatasetRequest
    from labeldp.data.dataset_spec import TableOptions as TableOptions
    from labeldp.data.digits import load_digits_dataset as load_digits_dataset
    from labeldp.data.grid import label_grid as label_grid
    from labeldp.data.grid import snap_to_grid as snap_to_grid
    from labeldp.data.idx import load_idx_dataset as load_idx_dataset
    from labeldp.data.idx import read_idx as read_idx
    from labeldp.data.loading import download_dataset as download_dataset
    from labeldp.data.loading import folder_datasets as folder_datasets
    from labeldp.data.loading import load_dataset as load_dataset
    from labeldp.data.movielens import load_movielens_dataset as load_movielens_dataset
    from labeldp.data.splits import split_stages as split_stages
    from labeldp.data.table import load_table_dataset as load_table_dataset

__getattr__, __dir__, __all__ = lazy_exports(__name__)
