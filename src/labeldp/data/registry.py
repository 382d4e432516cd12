"""Datasets by name: a registry, as for methods, from which ``load_dataset`` and ``labeldp train
--dataset`` find a loader.

A dataset is registered with :func:`register_dataset` (labeldp's own in :mod:`labeldp.data.builtin`,
yours in a module you import, or a ``--recipes`` file). This module imports no loader: a built-in
loader is named as ``"module:function"`` and imported when the dataset is first loaded, so that the
command line lists the datasets without importing torch or scikit-learn.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from labeldp.errors import ConfigError

if TYPE_CHECKING:
    from labeldp.data.dataset import LabeledDataset

#: where a dataset's data comes from
SOURCES = ("embedded", "folder", "table")


@dataclass(frozen=True)
class DatasetRequest:
    """What a run asks of a dataset: the folder or table, and the public options of a table.

    Parameters
    ----------
    data_dir : pathlib.Path or None, optional
        The folder of a ``folder`` dataset.
    table, test_table : pathlib.Path or None, optional
        A ``table`` dataset's file, and its public test file.
    label_column : str, optional
        The table's label column.
    classes : tuple of str or None, optional
        The declared classes.
    features, drop : tuple of str or None, optional
        The feature columns, and the columns that are not features.
    id_column : str or None, optional
        A row identifier, never a feature.
    test_fraction : float, optional
        The share of rows held out as the test set when there is no test file.
    split_seed : int, optional
        The public seed of the split.
    label_range : tuple of float or None, optional
        A numeric label's declared range.
    label_grid_size : int or None, optional
        The number of grid points over the range.
    public_test_split : bool, optional
        Treat the labels of held-out test rows as public (exact test metrics the epsilon does not cover).
    unit_column : str or None, optional
        A table's privacy unit column (public, never a feature).
    max_rows_per_unit : int or None, optional
        The most rows of one unit kept (with ``unit_column``).
    """

    data_dir: Path | None = None
    table: Path | None = None
    test_table: Path | None = None
    label_column: str = "label"
    classes: tuple[str, ...] | None = None
    features: tuple[str, ...] | None = None
    drop: tuple[str, ...] = ()
    id_column: str | None = None
    test_fraction: float = 0.2
    split_seed: int = 0
    label_range: tuple[float, float] | None = None
    label_grid_size: int | None = None
    public_test_split: bool = False
    unit_column: str | None = None
    max_rows_per_unit: int | None = None
    one_row_per_person: bool = False


@dataclass(frozen=True)
class Dataset:
    """One dataset a run can name.

    Parameters
    ----------
    name : str
        Its name (``--dataset``).
    source : str
        ``embedded`` (no files), ``folder`` (standard files in ``--data-dir``) or ``table`` (``--table``).
    loader : callable or str
        ``loader(request) -> LabeledDataset``, or ``"module:function"`` naming it (imported on use).
    download : callable or str, optional
        ``download(data_dir)``, fetching the standard files (needs internet), or ``"module:function"``.
    held_out_test : bool, optional
        Whether its test rows are held out of the private label column (their labels are then
        private; a ``table`` dataset's are whenever it has no public test file).
    help : str, optional
        One line for the command line's help.
    aliases : tuple of str, optional
        Other names of the dataset (default: none), registered beside its name: ``--dataset`` and
        :func:`get_dataset` take them too.

    Raises
    ------
    labeldp.errors.ConfigError
        If ``source`` is not one of :data:`SOURCES`.
    """

    name: str
    source: str
    loader: Callable[[DatasetRequest], LabeledDataset] | str
    download: Callable[[Path], None] | str | None = None
    held_out_test: bool = False
    help: str = ""
    aliases: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ConfigError(f"dataset {self.name!r}: source must be one of {SOURCES}, got {self.source!r}")

    def load(self, request: DatasetRequest) -> LabeledDataset:
        """The dataset, loaded by its loader.

        Parameters
        ----------
        request : DatasetRequest
            What the run asks of the dataset.

        Returns
        -------
        labeldp.data.dataset.LabeledDataset
            What the loader returns.

        Raises
        ------
        labeldp.errors.LabelDPError
            Whatever the loader raises (a missing file, a file it cannot use, options it refuses).
        """
        return _resolve(self.loader)(request)

    def fetch(self, data_dir: Path) -> None:
        """Download its standard files into ``data_dir``.

        Parameters
        ----------
        data_dir : pathlib.Path
            The folder to download into.

        Raises
        ------
        labeldp.errors.ConfigError
            If the dataset has no download.
        """
        if self.download is None:
            raise ConfigError(f"dataset {self.name!r} has nothing to download")
        _resolve(self.download)(Path(data_dir))


_DATASETS: dict[str, Dataset] = {}


def register_dataset(dataset: Dataset) -> Dataset:
    """Add ``dataset`` under its name and its aliases; a name registered twice is an error.

    Parameters
    ----------
    dataset : Dataset
        The dataset.

    Returns
    -------
    Dataset
        The same dataset.

    Raises
    ------
    labeldp.errors.ConfigError
        If a dataset of that name, or of one of its aliases, is already registered.
    """
    names = (dataset.name, *dataset.aliases)
    _builtin()  # labeldp's own names are taken (a no-op while labeldp.data.builtin registers them)
    for name in names:
        if name in _DATASETS or names.count(name) > 1:
            raise ConfigError(f"dataset {name!r} is already registered")
    for name in names:
        _DATASETS[name] = dataset
    return dataset


def _builtin() -> None:
    importlib.import_module("labeldp.data.builtin")


def dataset_names() -> tuple[str, ...]:
    """Every registered dataset's name, aliases included, labeldp's own first.

    Returns
    -------
    tuple of str
        The names, in registration order.
    """
    _builtin()
    return tuple(_DATASETS)


def get_dataset(name: str) -> Dataset:
    """The dataset registered as ``name`` (its name or an alias); an unknown name is a
    :class:`~labeldp.errors.ConfigError`.

    Parameters
    ----------
    name : str
        A registered dataset's name or alias.

    Returns
    -------
    Dataset
        The registered dataset.

    Raises
    ------
    labeldp.errors.ConfigError
        If no dataset is registered as ``name``.
    """
    _builtin()
    if name not in _DATASETS:
        raise ConfigError(f"unknown dataset {name!r}; choose one of {', '.join(_DATASETS)}")
    return _DATASETS[name]


def _resolve(target: Callable | str) -> Callable:
    if callable(target):
        return target
    module, _, function = target.partition(":")
    return getattr(importlib.import_module(module), function)


__all__ = ["Dataset", "DatasetRequest", "SOURCES", "dataset_names", "get_dataset", "register_dataset"]
