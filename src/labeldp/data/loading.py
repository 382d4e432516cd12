"""Loading a dataset by name (:mod:`labeldp.data.dataset_registry`), its options checked first."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from labeldp.data.dataset_registry import DatasetRequest, dataset_names, get_dataset
from labeldp.errors import ConfigError

if TYPE_CHECKING:
    from labeldp.data.dataset import LabeledDataset


def load_dataset(
    name: str,
    data_dir: str | Path | None = None,
    *,
    table: str | Path | None = None,
    label_column: str = "label",
    test_table: str | Path | None = None,
    classes: tuple[str, ...] | None = None,
    features: tuple[str, ...] | None = None,
    drop: tuple[str, ...] = (),
    id_column: str | None = None,
    test_fraction: float = 0.2,
    split_seed: int = 0,
    label_range: tuple[float, float] | None = None,
    label_grid_size: int | None = None,
    public_test_split: bool = False,
    unit_column: str | None = None,
    max_rows_per_unit: int | None = None,
    one_row_per_person: bool = False,
) -> LabeledDataset:
    """Load the dataset registered as ``name``, its options checked before anything is read.

    ``digits`` is embedded; folder datasets read their standard files from ``data_dir``; ``csv`` reads
    ``table`` (relative to ``data_dir`` where given): a classification over the declared ``classes``, or a
    regression on the grid of ``label_grid_size`` points over ``label_range``. Test rows held out of the
    private label column (``csv`` without ``test_table``, ``movielens``) keep private labels unless
    ``public_test_split``. The options are :class:`~labeldp.data.dataset_registry.DatasetRequest`'s, the table's only
    for a ``table`` dataset.
    """
    dataset = get_dataset(name)
    table_options = (
        table is not None
        or test_table is not None
        or label_column != "label"
        or features
        or drop
        or id_column
        or label_range is not None
        or label_grid_size is not None
        or unit_column is not None
        or max_rows_per_unit is not None
        or one_row_per_person
    )
    if dataset.source != "table" and table_options:
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
        table, test_table = (Path(data_dir) / path if path is not None else None for path in (table, test_table))
    if dataset.source == "folder" and data_dir is None:
        raise ConfigError(f"dataset {name!r} needs a data folder (--data-dir DIR)")
    request = DatasetRequest(
        Path(data_dir) if data_dir is not None else None,
        Path(table) if table is not None else None,
        Path(test_table) if test_table is not None else None,
        label_column,
        tuple(classes) if classes is not None else None,
        tuple(features) if features else None,
        tuple(drop),
        id_column,
        test_fraction,
        split_seed,
        tuple(label_range) if label_range is not None else None,
        label_grid_size,
        public_test_split,
        unit_column,
        max_rows_per_unit,
        one_row_per_person,
    )
    return dataset.load(request)


def download_dataset(name: str, data_dir: str | Path) -> None:
    """Fetch a dataset's standard files into ``data_dir`` (needs internet)."""
    get_dataset(name).fetch(Path(data_dir))


def folder_datasets() -> tuple[str, ...]:
    """The datasets read from a folder of their standard files (``--data-dir``), in registration order."""
    return tuple(name for name in dataset_names() if get_dataset(name).source == "folder")


__all__ = ["download_dataset", "folder_datasets", "load_dataset"]
