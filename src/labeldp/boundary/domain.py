"""The label domain: the declared classes, and the one way label values are matched to them.

The classes are public, declared, never read off the labels. Values are matched as text, by
:func:`~labeldp.tables.keys.canonical_label` (``1``, ``1.0``, `` 1`` and ``true`` are one class, whatever
type a file or array gives them). A value outside the classes or missing is an error saying neither which,
nor where, nor how many: all three depend on private labels.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from labeldp.errors import ConfigError, DataError
from labeldp.tables.keys import canonical_label


class LabelDomain:
    """The declared classes of a label, in order, and the matching of label values to them.

    Parameters
    ----------
    classes : sequence
        At least two label values whose canonical spellings (:func:`~labeldp.tables.keys.canonical_label`) differ.

    Attributes
    ----------
    declared : tuple
        The classes as given (numpy scalars as Python values).
    lookup : dict
        Canonical spelling -> class position.
    """

    def __init__(self, classes: Iterable[Any]):
        if isinstance(classes, (str, bytes)) or classes is None:
            raise ConfigError("classes must be a sequence of label values (the public label domain, in order)")
        self.declared = tuple(value.item() if isinstance(value, np.generic) else value for value in classes)
        spellings = [canonical_label(value) for value in self.declared]
        if len(spellings) < 2 or len(set(spellings)) != len(spellings):
            distinct = len(set(spellings))
            raise ConfigError(
                f"classes must be at least two distinct label values, got {distinct} "
                f"class{'' if distinct == 1 else 'es'} ({list(self.declared)}, compared as text)"
            )
        self.lookup = {spelling: position for position, spelling in enumerate(spellings)}

    @property
    def size(self) -> int:
        """K, the number of classes."""
        return len(self.declared)

    def same_as(self, classes: Iterable[Any]) -> bool:
        """Whether ``classes`` are these classes, in this order (compared as text)."""
        return [canonical_label(value) for value in classes] == list(self.lookup)

    def arrow_positions(self, column: pa.Array | pa.ChunkedArray, where: str) -> np.ndarray:
        """Class positions (int64) of an Arrow label column, matched as text; releases nothing.

        A label missing or outside the classes raises :class:`~labeldp.errors.DataError` saying neither which,
        where, nor how many.
        """
        if isinstance(column, pa.ChunkedArray):
            column = column.combine_chunks()
        if column.null_count:
            raise self.refusal(where)
        if pa.types.is_dictionary(column.type):
            column = column.cast(column.type.value_type)
        encoded = pc.dictionary_encode(column)
        positions = self.value_positions(encoded.dictionary.to_pylist(), where)
        return positions[encoded.indices.to_numpy(zero_copy_only=False)]

    def value_positions(self, values: Iterable[Any], where: str) -> np.ndarray:
        """The class position (int64) of each of a few distinct ``values``; one outside the classes refused unnamed."""
        positions = np.array([self.lookup.get(canonical_label(value), -1) for value in values], dtype=np.int64)
        if (positions < 0).any():
            raise self.refusal(where)
        return positions

    def positions(self, labels: Any, where: str = "labels") -> np.ndarray:
        """The class positions (int64) of labels in memory; one missing or outside the classes refused unnamed."""
        if np.ndim(labels) != 1 or len(labels) == 0:
            raise DataError(f"{where}: labels must be a non-empty 1-d array or Series")
        positions = self.matched(labels)
        if (positions < 0).any():
            raise self.refusal(where)
        return positions

    def matched(self, labels: Any) -> np.ndarray:
        """The class position of each label, -1 for a missing value or one outside the classes: for public labels
        (a test set's), where such a value is no class rather than an error.
        """
        series = labels if isinstance(labels, pd.Series) else pd.Series(np.asarray(labels, dtype=object))
        codes, uniques = pd.factorize(series, use_na_sentinel=True)
        found = [self.lookup.get(canonical_label(value), -1) for value in uniques]
        return np.array(found + [-1], dtype=np.int64)[codes]  # a missing value's code -1 finds the last

    def refusal(self, where: str) -> DataError:
        """The error for labels missing or outside the classes, saying neither which, where, nor how many."""
        return DataError(
            f"{where} has labels missing or outside the declared classes {list(self.declared)}; declare "
            "every label value (--classes, classes=...). Which values, where and how many are not said: "
            "the labels are private; nothing was released"
        )


def class_array(classes: Iterable[Any]) -> np.ndarray:
    """The classes as scikit-learn's ``classes_`` holds them: their own numeric dtype where all are numbers or
    booleans (int64 for integers), else an object array.
    """
    values = np.asarray(list(classes))
    return values if values.dtype.kind in "biuf" else np.asarray(list(classes), dtype=object)


def fit_classes(declared: Iterable[Any] | None, carried: Iterable[Any] | None) -> tuple:
    """An estimator fit's label domain: its declared ``classes`` or those its labels carry, which must agree
    where both are given.
    """
    domain = declared if declared is not None else carried
    if domain is None:
        raise ConfigError(
            "the label domain must be declared: PrivateLabels(y, classes=[...]) or classes=[...] (public, "
            "never read off the labels)"
        )
    if declared is not None and carried is not None and not LabelDomain(declared).same_as(carried):
        raise ConfigError(f"classes {list(declared)} differ from the labels' own {list(carried)}")
    return LabelDomain(domain).declared


__all__ = ["LabelDomain", "class_array", "fit_classes"]
