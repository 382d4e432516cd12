"""Datasets by name: the registry from which ``load_dataset`` and ``labeldp train --dataset`` find a loader.

A dataset is registered with :func:`register_dataset` (labeldp's own in :mod:`labeldp.data.builtin_datasets`).
A built-in loader is named as ``"module:function"`` and imported on first load, so the command line
lists the datasets without importing torch or scikit-learn.
"""

from __future__ import annotations

import functools
import importlib

from labeldp.data.dataset_spec import Dataset
from labeldp.errors import ConfigError

_DATASETS: dict[str, Dataset] = {}


def register_dataset(dataset: Dataset) -> Dataset:
    """Add ``dataset`` under its name and aliases; a name registered twice is a
    :class:`~labeldp.errors.ConfigError`.
    """
    _builtin()  # labeldp's own names are taken first
    return _add(dataset)


def _add(dataset: Dataset) -> Dataset:
    names = (dataset.name, *dataset.aliases)
    for name in names:
        if name in _DATASETS or names.count(name) > 1:
            raise ConfigError(f"dataset {name!r} is already registered")
    for name in names:
        _DATASETS[name] = dataset
    return dataset


@functools.cache  # once per process, as an import is
def _builtin() -> None:
    for dataset in importlib.import_module("labeldp.data.builtin_datasets").BUILTIN_DATASETS:
        _add(dataset)


def dataset_names() -> tuple[str, ...]:
    """Every registered name, aliases included, in registration order (labeldp's own first)."""
    _builtin()
    return tuple(_DATASETS)


def get_dataset(name: str) -> Dataset:
    """The dataset registered as ``name`` (a name or alias); an unknown name is a
    :class:`~labeldp.errors.ConfigError`.
    """
    _builtin()
    if name not in _DATASETS:
        raise ConfigError(f"unknown dataset {name!r}; choose one of {', '.join(_DATASETS)}")
    return _DATASETS[name]


__all__ = ["dataset_names", "get_dataset", "register_dataset"]
