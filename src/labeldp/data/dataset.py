"""The dataset container: public inputs, private training labels, a public test set."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from labeldp._validation import check_finite_features, check_labels, check_num_classes, check_same_length
from labeldp.boundary import PrivateLabels
from labeldp.data.grid import snap_to_grid
from labeldp.errors import DataError

#: Augmentation policies the trainer knows: none, small translations (digits), crop+flip (CIFAR).
AUGMENTATIONS = ("none", "translate", "crop-flip")


@dataclass
class LabeledDataset:
    """Train/test arrays of one dataset: public inputs, private training labels, a public or private test set.

    ``y_train`` holds the *private* labels as :class:`~labeldp.boundary.PrivateLabels`: only the release
    boundary and the private-side trainers read them. A **regression** has ``label_values``, the public grid
    of G values, declared, never read off the labels: its labels are then grid indices (values snapped to
    the nearest point, :func:`labeldp.data.grid.snap_to_grid`) and ``num_classes`` is G.

    Parameters
    ----------
    x_train, x_test : numpy.ndarray
        The public inputs, (n, C, H, W) images or (n, d) rows, normalised, finite (stored as float32).
    y_train : labeldp.boundary.PrivateLabels or numpy.ndarray
        The private training labels, or class positions in [0, ``num_classes``) wrapped in them.
    y_test : numpy.ndarray or labeldp.boundary.PrivateLabels
        Public class positions (a test set published as such, e.g. MNIST's), or ``PrivateLabels`` for
        held-out rows of the private label column, whose metrics come from a release (:attr:`public_test`).
    num_classes : int
        The number of classes (at least 2); for a regression, G.
    augmentation : str, optional
        One of :data:`AUGMENTATIONS`.
    preprocessor : object, optional
        The fitted, public encoding of raw rows into inputs (a table's
        :class:`~labeldp.data.table.TablePreprocessor`).
    label_values : numpy.ndarray or None, optional
        A regression's public grid: ``num_classes`` finite, strictly increasing values.
    y_test_values : numpy.ndarray or None, optional
        A regression's raw public test values, against which the test error is measured.
    categorical : tuple of int, optional
        The number of values of each leading input column holding integer codes (user and item ids), which
        embedding models look up and other models read as numbers.
    units : numpy.ndarray or None, optional
        Each private row's public privacy unit code (:mod:`labeldp.boundary.units`), training rows then
        private test rows, a unit's rows all on one side; None: each row its own unit.
    unit_bound : dict or None, optional
        A table's privacy unit and the public rule's effect (``column``, ``max_rows``, ``units``,
        ``rows_read``, ``rows_kept``, ``most_rows``), to show and record.
    """

    name: str
    x_train: np.ndarray
    y_train: PrivateLabels
    x_test: np.ndarray
    y_test: np.ndarray | PrivateLabels
    num_classes: int
    augmentation: str = "none"
    class_names: list[str] = field(default_factory=list)
    preprocessor: Any = None  # the fitted encoding of raw rows into inputs (tables), public
    label_values: np.ndarray | None = None
    y_test_values: np.ndarray | None = None
    categorical: tuple[int, ...] = ()
    units: np.ndarray | None = None
    unit_bound: dict[str, Any] | None = None
    facts: dict[str, Any] | None = None  # public facts naming the dataset's ledger (labeldp.accounting.datasets)
    table_rows: Any = None  # a table's public columns of the private rows, which the ledgers read people from

    def __post_init__(self) -> None:
        self.num_classes = check_num_classes(self.num_classes)
        self.x_train = check_finite_features(self.x_train, "x_train").astype(np.float32, copy=False)
        self.x_test = check_finite_features(self.x_test, "x_test").astype(np.float32, copy=False)
        self.y_train = self._private(self.y_train, "y_train")
        if isinstance(self.y_test, PrivateLabels):
            self.y_test = self._private(self.y_test, "y_test")
            if self.y_test_values is not None:
                raise DataError("the raw test values of private test labels are private too: give no y_test_values")
        else:
            self.y_test = check_labels(self.y_test, self.num_classes, "y_test")
        check_same_length(x_train=self.x_train, y_train=self.y_train)
        check_same_length(x_test=self.x_test, y_test=self.y_test)
        if self.x_train.shape[1:] != self.x_test.shape[1:]:
            raise DataError(f"x_train and x_test shapes differ: {self.x_train.shape[1:]} vs {self.x_test.shape[1:]}")
        if self.augmentation not in AUGMENTATIONS:
            raise DataError(f"augmentation must be one of {AUGMENTATIONS}, got {self.augmentation!r}")
        self._check_regression()
        self._check_categorical()
        self._check_units()

    def _check_units(self) -> None:
        if self.units is None:
            return
        self.units = np.asarray(self.units, dtype=np.int64)
        if self.units.shape != (self.private_rows,) or self.units.min() < 0:
            raise DataError(f"units must give each of the {self.private_rows} private rows a unit code >= 0")
        if (
            not self.public_test
            and np.intersect1d(self.units[: len(self.y_train)], self.units[len(self.y_train) :]).size
        ):
            raise DataError("a privacy unit's rows must all be training rows or all test rows")

    @property
    def train_units(self) -> np.ndarray | None:
        """Each training row's privacy unit code (None: each row its own)."""
        return None if self.units is None else self.units[: len(self.y_train)]

    def _private(self, labels, name: str) -> PrivateLabels:
        if not isinstance(labels, PrivateLabels):
            return PrivateLabels.from_indices(labels, self.num_classes)
        if labels.num_classes != self.num_classes:
            raise DataError(f"{name} has {labels.num_classes} classes, the dataset {self.num_classes}")
        return labels

    @property
    def private_rows(self) -> int:
        """The rows whose labels are private: the training rows, then the test rows where theirs are private too
        (a run's ledger covers them in that order).
        """
        return len(self.y_train) + (0 if self.public_test else len(self.y_test))

    @property
    def public_test(self) -> bool:
        """Whether the test labels are public (exact metrics), not private held-out rows (estimated metrics)."""
        return not isinstance(self.y_test, PrivateLabels)

    def _check_regression(self) -> None:
        if self.label_values is None:
            if self.y_test_values is not None:
                raise DataError("y_test_values are the raw test values of a regression: give label_values too")
            return
        grid = np.asarray(self.label_values, dtype=np.float64)
        if grid.ndim != 1 or grid.size != self.num_classes:
            raise DataError(
                f"label_values must be a 1-d grid of num_classes ({self.num_classes}) values, got shape {grid.shape}"
            )
        if not np.all(np.isfinite(grid)) or np.any(np.diff(grid) <= 0):
            raise DataError("label_values must be finite and strictly increasing")
        self.label_values = grid
        if self.y_test_values is not None:
            values = np.asarray(self.y_test_values, dtype=np.float64)
            if values.shape != self.y_test.shape or not np.all(np.isfinite(values)):
                raise DataError(f"y_test_values must be {len(self.y_test)} finite values, one per test example")
            self.y_test_values = values

    def _check_categorical(self) -> None:
        sizes = tuple(int(size) for size in self.categorical)
        if not sizes:
            self.categorical = ()
            return
        if self.x_train.ndim != 2 or len(sizes) > self.x_train.shape[1] or min(sizes) < 1:
            raise DataError(
                f"categorical sizes {list(sizes)} must be positive and cover leading columns of a "
                f"(n, d) table, inputs have shape {self.input_shape}"
            )
        for name, x in (("x_train", self.x_train), ("x_test", self.x_test)):
            codes = x[:, : len(sizes)]
            if np.any(codes != np.round(codes)) or np.any(codes < 0) or np.any(codes >= np.array(sizes)):
                raise DataError(
                    f"the categorical columns of {name} must hold integer codes in [0, size) for sizes {list(sizes)}"
                )
        self.categorical = sizes

    @property
    def is_regression(self) -> bool:
        """Whether the labels are numeric on a public grid (``label_values``), measured by squared error."""
        return self.label_values is not None

    @property
    def test_values(self) -> np.ndarray:
        """A regression's public test labels as values: the raw ones if kept, else their grid points."""
        if self.label_values is None:
            raise DataError(f"dataset {self.name!r} is a classification: its labels have no values")
        if not self.public_test:
            raise DataError(f"dataset {self.name!r} has private test labels: their metrics come from a release")
        return self.y_test_values if self.y_test_values is not None else self.label_values[self.public_test_labels]

    @property
    def public_test_labels(self) -> np.ndarray:
        """The public test labels (class positions)."""
        if isinstance(self.y_test, PrivateLabels):
            raise DataError(f"dataset {self.name!r} has private test labels: their metrics come from a release")
        return self.y_test

    @property
    def input_shape(self) -> tuple[int, ...]:
        """The shape of one input."""
        return tuple(self.x_train.shape[1:])

    def __repr__(self) -> str:
        values = self.label_values
        grid = f", label_values=[{values[0]:g} .. {values[-1]:g}]" if values is not None else ""
        return (
            f"LabeledDataset({self.name!r}, train={len(self.y_train)}, test={len(self.y_test)}"
            f"{'' if self.public_test else ' (private labels)'}, "
            f"input_shape={self.input_shape}, num_classes={self.num_classes}{grid})"
        )


def standardize_images(train: np.ndarray, test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Scale uint8 (n, C, H, W) images to [0, 1] and standardise each channel with the training images'
    statistics.
    """
    train = train.astype(np.float32) / 255.0
    test = test.astype(np.float32) / 255.0
    mean = train.mean(axis=(0, 2, 3), keepdims=True)
    std = train.std(axis=(0, 2, 3), keepdims=True) + 1e-6
    return (train - mean) / std, (test - mean) / std


def regression_dataset(
    name: str, x_train, values_train, x_test, values_test, grid, *, private_test: bool = False, **extra
) -> LabeledDataset:
    """A regression dataset from raw values snapped to the public, declared ``grid``, the raw test values kept
    for the test error unless ``private_test`` (test rows held out of the private label column: their grid
    positions private, their raw values dropped). ``extra`` goes to :class:`LabeledDataset`.
    """
    grid = np.asarray(grid, dtype=np.float64)
    test = snap_to_grid(values_test, grid, "test labels")
    return LabeledDataset(
        name,
        x_train,
        PrivateLabels.from_indices(snap_to_grid(values_train, grid, "training labels"), grid.size),
        x_test,
        PrivateLabels.from_indices(test, grid.size) if private_test else test,
        num_classes=grid.size,
        label_values=grid,
        y_test_values=None if private_test else np.asarray(values_test, dtype=np.float64),
        class_names=[f"{v:g}" for v in grid],
        **extra,
    )
