"""Bins of public features, in which :class:`~labeldp.estimators.logistic.LabelDPLogisticRegression`
counts the labels.

:class:`PublicBins` cuts every feature of a table into bins, one integer per feature, from the inputs alone
(never from labels); :func:`bin_indicators` turns the bins into the rows' one-hot bin indicators, the design of
the logistic regression fitted from noisy label marginals.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import scipy.sparse as sp
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_array, check_is_fitted

from labeldp.config.marginals_config import DEFAULT_BINS
from labeldp.errors import ConfigError
from labeldp.training.from_marginals import bin_indicators, quantile_edges

__all__ = ["DEFAULT_BINS", "PublicBins", "bin_indicators"]


class PublicBins(TransformerMixin, BaseEstimator):
    """Bins of public features, one integer per feature: numeric and boolean columns cut at the
    quantiles of the fitted rows (``n_bins`` bins at most; integer codes count as numbers: give a
    pandas ``category`` column to bin them by value), every other column (categorical, text) by its
    categories, compared as text. Bin 0 of every feature holds missing values and categories not seen
    in ``fit``. Computed from the inputs alone, never from labels.

    Parameters
    ----------
    n_bins : int
        The most bins of a numeric feature, besides bin 0 (its quantiles cut the fitted rows).

    Attributes
    ----------
    columns_ : list
        The fitted feature columns, in order.
    edges_ : dict
        Numeric columns' cut points.
    categories_ : dict
        The other columns' categories (as text, sorted).
    bins_per_feature_ : numpy.ndarray
        (features,) the number of bins of each feature, bin 0 included.
    """

    def __init__(self, n_bins: int = DEFAULT_BINS):
        self.n_bins = n_bins

    def fit(self, X, y=None) -> PublicBins:
        """Cut every feature of ``X`` into bins.

        Parameters
        ----------
        X : pandas.DataFrame, array-like or sparse matrix
            The public inputs (an array's or a matrix's columns are numbered; a sparse column's implicit
            zeros count as values).
        y : None
            Ignored: the bins never depend on labels.

        Returns
        -------
        PublicBins
            This transformer, fitted.

        Raises
        ------
        ConfigError
            If ``n_bins`` is not an integer >= 2, or ``X`` is a table without feature columns.
        ValueError
            If an array ``X`` is not 2-d, is complex, or has no rows or columns (scikit-learn's ``check_array``).
        """
        if int(self.n_bins) != self.n_bins or self.n_bins < 2:
            raise ConfigError(f"n_bins must be an integer >= 2, got {self.n_bins}")
        frame = as_table(X)
        if frame.shape[1] == 0:
            raise ConfigError("the table has no feature columns")
        self.columns_, self.edges_, self.categories_ = list(frame.columns), {}, {}
        sizes = []
        for column in self.columns_:
            values = frame[column]
            if _numeric(values):
                self.edges_[column] = quantile_edges(values.to_numpy(np.float64), self.n_bins)
                sizes.append(self.edges_[column].size + 2)
            else:
                categorical = isinstance(values.dtype, pd.CategoricalDtype)
                known = values.cat.categories if categorical else values.dropna().astype(str).unique()
                self.categories_[column] = pd.Index(sorted(set(map(str, known))))  # 1 and "1" are one category
                sizes.append(self.categories_[column].size + 1)
        self.bins_per_feature_ = np.array(sizes, dtype=np.int64)
        return self

    def transform(self, X) -> np.ndarray:
        """The bin of every feature of every row.

        Parameters
        ----------
        X : pandas.DataFrame, array-like or sparse matrix
            Public inputs with the fitted feature columns.

        Returns
        -------
        numpy.ndarray
            (n, features) bin indices (int64; 0 for a missing value or an unseen category).

        Raises
        ------
        ConfigError
            If ``X`` lacks a fitted feature column.
        ValueError
            If an array ``X`` is not 2-d, is complex, or has no rows or columns (scikit-learn's ``check_array``).
        """
        check_is_fitted(self, "bins_per_feature_")
        frame = as_table(X)
        missing = [column for column in self.columns_ if column not in frame.columns]
        if missing:
            raise ConfigError(f"the table lacks the fitted feature columns {missing}")
        codes = np.empty((len(frame), len(self.columns_)), dtype=np.int64)
        for j, column in enumerate(self.columns_):
            values = frame[column]
            if column in self.edges_:
                numbers = pd.to_numeric(values, errors="coerce").to_numpy(np.float64)
                codes[:, j] = np.where(
                    np.isfinite(numbers), 1 + np.searchsorted(self.edges_[column], numbers, side="right"), 0
                )
            else:
                position = self.categories_[column].get_indexer(values.astype(object).map(str, na_action="ignore"))
                codes[:, j] = np.where(values.isna().to_numpy(), 0, position + 1)
        return codes


class _SparseColumns:
    """A sparse matrix read as a table: numbered columns, each made dense (its implicit entries zeros) when it
    is binned. pandas' sparse frames are not used: pandas 3.0 reads the implicit entries as missing."""

    def __init__(self, X) -> None:
        self._matrix = sp.csc_matrix(X)
        self.shape = self._matrix.shape
        self.columns = pd.RangeIndex(self.shape[1])

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, column: int) -> pd.Series:
        return pd.Series(self._matrix[:, [column]].toarray().ravel())


def as_table(X) -> pd.DataFrame | _SparseColumns:
    """``X`` as a table: a table as it is; a sparse matrix as :class:`_SparseColumns`; an array checked as
    scikit-learn checks it (2-d, not complex), its columns numbered, a column of objects that are all
    numbers (or missing) taken as numbers."""
    if isinstance(X, pd.DataFrame):
        return X
    if sp.issparse(X):
        return _SparseColumns(X)
    frame = pd.DataFrame(check_array(X, dtype=None, ensure_all_finite=False))
    for column in frame.columns[frame.dtypes.map(pd.api.types.is_object_dtype)]:
        try:
            frame[column] = frame[column].astype(np.float64)
        except (TypeError, ValueError):  # text (or other objects): binned by category
            pass
    return frame


def _numeric(values: pd.Series) -> bool:
    """Numbers and booleans are cut at quantiles (a boolean's two values land in two bins, whether
    given later as True/False or 1/0); every other column is categorical."""
    return pd.api.types.is_numeric_dtype(values)
