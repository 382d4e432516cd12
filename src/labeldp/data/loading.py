"""Loading a dataset by name (:mod:`labeldp.data.dataset_registry`), its options checked first."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

from labeldp.data.dataset_registry import dataset_names, get_dataset
from labeldp.data.dataset_spec import DatasetRequest, TableOptions
from labeldp.errors import ConfigError

if TYPE_CHECKING:
    from labeldp.data.dataset import LabeledDataset


def load_dataset(
    name: str,
    data_dir: str | Path | None = None,
    table_options: TableOptions | None = None,
    *,
    test_fraction: float = 0.2,
    split_seed: int = 0,
    public_test: bool = False,
) -> LabeledDataset:
    """Load the dataset registered as ``name``, its options checked before anything is read.

    ``digits`` is embedded; folder datasets read their standard files from ``data_dir``; ``csv`` reads its
    ``table_options``' table (relative to ``data_dir`` where given): a classification over the declared
    ``classes``, or a regression on the grid of ``label_grid`` points over ``label_range``. Test rows held
    out of the private label column (``csv`` without ``test_table``, ``movielens``) keep private labels
    unless ``public_test``.
    """
    dataset, table_options = get_dataset(name), table_options or TableOptions()
    # classes off a table are refused by the run's checks (config/run_config.py), in words of their own
    if dataset.source != "table" and dataclasses.replace(table_options, classes=None) != TableOptions():
        raise ConfigError(
            f"--table, --test-table, --label-column, --features, --drop, --id-column, --label-range, "
            f"--label-grid, --privacy-unit and --max-rows-per-unit are for a table (dataset 'csv'), not {name!r}, "
            "which defines its own labels"
        )
    folders = [other for other in dataset_names() if get_dataset(other).source == "folder"]
    if dataset.source == "embedded" and data_dir is not None:
        raise ConfigError(
            f"dataset {name!r} is embedded: it takes no --data-dir (for a dataset in that folder, name "
            f"it with --dataset: {', '.join(folders)})"
        )
    if dataset.source == "table" and data_dir is not None:  # the folder of its relative paths
        table, test_table = (
            Path(data_dir) / p if p is not None else None for p in (table_options.table, table_options.test_table)
        )
        table_options = dataclasses.replace(table_options, table=table, test_table=test_table)
    if dataset.source == "folder" and data_dir is None:
        raise ConfigError(f"dataset {name!r} needs a data folder (--data-dir DIR)")
    data_path = Path(data_dir) if data_dir is not None else None
    return dataset.load(DatasetRequest(data_path, table_options, test_fraction, split_seed, public_test))


def download_dataset(name: str, data_dir: str | Path) -> None:
    """Fetch a dataset's standard files into ``data_dir`` (needs internet)."""
    get_dataset(name).fetch(Path(data_dir))


def folder_datasets() -> tuple[str, ...]:
    """The datasets read from a folder of their standard files (``--data-dir``), in registration order."""
    return tuple(name for name in dataset_names() if get_dataset(name).source == "folder")


__all__ = ["download_dataset", "folder_datasets", "load_dataset"]
