"""What the dataset registry holds (:class:`Dataset`: a name and its loader) and what a run asks of a dataset
(:class:`DatasetRequest`, a table's :class:`TableOptions`)."""

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
class TableOptions:
    """A table's public options, each under its name in :class:`~labeldp.config.run_config.RunConfig` and
    ``config.json`` (whose help says what it means); paths and sequences given as they come are kept as
    :class:`~pathlib.Path` and tuples."""

    table: Path | None = None
    test_table: Path | None = None
    label_column: str = "label"
    classes: tuple[str, ...] | None = None
    features: tuple[str, ...] | None = None
    drop: tuple[str, ...] = ()
    id_column: str | None = None
    label_range: tuple[float, float] | None = None
    label_grid: int | None = None
    privacy_unit: str | None = None
    max_rows_per_unit: int | None = None
    one_row_per_person: bool = False

    def __post_init__(self) -> None:
        for name in ("table", "test_table"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, Path(getattr(self, name)))
        for name in ("classes", "label_range"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, tuple(getattr(self, name)))
        object.__setattr__(self, "features", tuple(self.features) if self.features else None)
        object.__setattr__(self, "drop", tuple(self.drop or ()))


@dataclass(frozen=True)
class DatasetRequest:
    """What a run asks of a dataset: its folder, the seed that splits off test rows (``test_fraction`` of them)
    and whether their labels are public (RunConfig's ``test_labels`` public), and a table's options, whole."""

    data_dir: Path | None = None
    table_options: TableOptions = TableOptions()
    test_fraction: float = 0.2
    split_seed: int = 0
    public_test: bool = False


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
        Whether its test rows are held out of the private label column, their labels then private (a
        ``table`` dataset's are whenever it has no public test file).
    help : str, optional
        One line for the command line's help.
    aliases : tuple of str, optional
        Other names, accepted by ``--dataset`` and :func:`get_dataset`.
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
        """The dataset, loaded by its loader (which may raise any :class:`~labeldp.errors.LabelDPError`)."""
        return _resolve(self.loader)(request)

    def fetch(self, data_dir: Path) -> None:
        """Download its standard files into ``data_dir``."""
        if self.download is None:
            raise ConfigError(f"dataset {self.name!r} has nothing to download")
        _resolve(self.download)(Path(data_dir))


def _resolve(target: Callable | str) -> Callable:
    if callable(target):
        return target
    module, _, function = target.partition(":")
    return getattr(importlib.import_module(module), function)


__all__ = ["Dataset", "DatasetRequest", "SOURCES", "TableOptions"]
