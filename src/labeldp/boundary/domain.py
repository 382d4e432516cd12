"""The label domain: the declared classes, and the one way label values are matched to them.

The classes are public: declared by the dataset or the user, in order, never read off the labels.
Values are matched as text, so that ``1``, ``1.0``, `` 1`` and ``true`` are one class whatever type a
file or an array gives them (a CSV column read as text, a Parquet column of integers, a pandas column
of objects). A value outside the classes, or a missing one, is an error that says neither which value,
nor where, nor how many there are: all three depend on private labels.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from labeldp.errors import ConfigError, DataError


def canonical_label(value: Any) -> str:
    """One spelling per label value: ``1``, ``1.0`` and `` 1`` are the same class, so are ``True``,
    ``true`` and ``1``.

    Parameters
    ----------
    value : object
        A label value of any type.

    Returns
    -------
    str
        Its canonical text.
    """
    text = str(value).strip()
    if text.lower() in ("true", "false"):
        return "1" if text.lower() == "true" else "0"
    try:
        return str(int(text))  # exact: a 19-digit id must not round through a float
    except ValueError:
        pass
    try:
        number = float(text)
    except ValueError:
        return text
    return str(int(number)) if number.is_integer() else repr(number)


class LabelDomain:
    """The declared classes of a label, in order, and the matching of label values to them.

    Parameters
    ----------
    classes : sequence
        At least two label values whose canonical spellings (:func:`canonical_label`) differ.

    Attributes
    ----------
    declared : tuple
        The classes as given (numpy scalars as Python values).
    lookup : dict
        Canonical spelling -> class position.

    Raises
    ------
    ConfigError
        If ``classes`` is not a sequence of at least two distinct values.
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
        """K, the number of classes.

        Returns
        -------
        int
            The number of declared classes.
        """
        return len(self.declared)

    def same_as(self, classes: Iterable[Any]) -> bool:
        """Whether ``classes`` are these classes, in this order (compared as text).

        Parameters
        ----------
        classes : iterable
            Label values.

        Returns
        -------
        bool
            True if their canonical spellings are the declared classes', in the same order.
        """
        return [canonical_label(value) for value in classes] == list(self.lookup)

    def value_positions(self, values: Iterable[Any], where: str) -> np.ndarray:
        """The class position of each of a few (distinct) ``values``; a value outside the classes is
        refused without being named.

        Parameters
        ----------
        values : iterable
            Label values (e.g. the distinct values of a column).
        where : str
            What the labels are, for the error message.

        Returns
        -------
        numpy.ndarray
            int64 positions in the declared classes, one per value.

        Raises
        ------
        DataError
            If a value is outside the classes (neither named nor counted).
        """
        positions = np.array([self.lookup.get(canonical_label(value), -1) for value in values], dtype=np.int64)
        if (positions < 0).any():
            raise self.refusal(where)
        return positions

    def positions(self, labels: Any, where: str = "labels") -> np.ndarray:
        """The class positions (int64) of labels held in memory: numpy, pandas or a list.

        Parameters
        ----------
        labels : array-like
            One label value per row.
        where : str
            What the labels are, for the error message (``"the training table"``).

        Returns
        -------
        numpy.ndarray
            (n,) int64 positions in the declared classes.

        Raises
        ------
        DataError
            If a label is missing or outside the classes (neither named nor counted).
        """
        if np.ndim(labels) != 1 or len(labels) == 0:
            raise DataError(f"{where}: labels must be a non-empty 1-d array or Series")
        positions = self.matched(labels)
        if (positions < 0).any():
            raise self.refusal(where)
        return positions

    def matched(self, labels: Any) -> np.ndarray:
        """The class position of each of a 1-d array of labels, -1 for a missing value or one outside
        the classes: for public labels (a test set's), where such a value is no class, not an error.

        Parameters
        ----------
        labels : array-like
            One label value per row (numpy, pandas or a list).

        Returns
        -------
        numpy.ndarray
            (n,) int64 positions in the declared classes, or -1.
        """
        series = labels if isinstance(labels, pd.Series) else pd.Series(np.asarray(labels, dtype=object))
        codes, uniques = pd.factorize(series, use_na_sentinel=True)
        found = [self.lookup.get(canonical_label(value), -1) for value in uniques]
        return np.array(found + [-1], dtype=np.int64)[codes]  # a missing value's code -1 finds the last

    def refusal(self, where: str) -> DataError:
        """The error for labels missing or outside the classes: it says neither which, nor where, nor how many.

        Parameters
        ----------
        where : str
            What the labels are (``"the training table"``), named in the message.

        Returns
        -------
        DataError
            The error, to raise.
        """
        return DataError(
            f"{where} has labels missing or outside the declared classes {list(self.declared)}; declare "
            "every label value (--classes, classes=...). Which values, where and how many are not said: "
            "the labels are private; nothing was released"
        )


def class_array(classes: Iterable[Any]) -> np.ndarray:
    """The classes as scikit-learn's ``classes_`` holds them: in their own numeric dtype where they are
    all numbers or booleans (int64 for integers), else an object array of the values as given.

    Parameters
    ----------
    classes : sequence
        Label values, in order.

    Returns
    -------
    numpy.ndarray
        (K,) the values.
    """
    values = np.asarray(list(classes))
    return values if values.dtype.kind in "biuf" else np.asarray(list(classes), dtype=object)


def fit_classes(declared: Iterable[Any] | None, carried: Iterable[Any] | None) -> tuple:
    """The label domain of an estimator's fit: its declared ``classes``, or those its labels carry;
    where both are given they must be the same classes in the same order.

    Parameters
    ----------
    declared : sequence or None
        The estimator's ``classes`` parameter.
    carried : sequence or None
        The classes of the private or released labels it is fitted on.

    Returns
    -------
    tuple
        The classes (the declared ones where given).

    Raises
    ------
    ConfigError
        If neither is given, or the two differ.
    """
    if declared is None and carried is None:
        raise ConfigError(
            "the label domain must be declared: PrivateLabels(y, classes=[...]) or classes=[...] (public, "
            "never read off the labels)"
        )
    if declared is not None and carried is not None and not LabelDomain(declared).same_as(carried):
        raise ConfigError(f"classes {list(declared)} differ from the labels' own {list(carried)}")
    return LabelDomain(declared if declared is not None else carried).declared


__all__ = ["LabelDomain", "canonical_label", "class_array", "fit_classes"]
