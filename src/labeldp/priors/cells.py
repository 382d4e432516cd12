"""Cells of rows a model scores alike, whose label counts a second stage releases instead of a label per row
(``lp-2st-counts``, :class:`~labeldp.estimators.LabelDPClassifier` with ``second_stage="counts"``).

The cells depend on public inputs and a model's scores only (a model trained on earlier releases: public),
so that one replaced label moves the counts of one cell.
"""

from __future__ import annotations

import numpy as np
from sklearn.tree import DecisionTreeRegressor

from labeldp.priors.clustering import histogram_priors

#: the share of the rows released by randomized response to train the model that draws the cells
FIRST_SHARE = 0.4


def cells_of(inputs, probabilities: np.ndarray, cell_rows: int, seed: int | None) -> np.ndarray:
    """Each row's cell, numbered from 0: the leaves (at least ``cell_rows`` rows each) of a regression tree over
    ``inputs`` (an array or a sparse matrix) fitted to the centred log ``probabilities``."""
    log_p = np.log(np.clip(probabilities, 1e-3, 1.0))
    target = log_p - log_p.mean(axis=1, keepdims=True)  # for two classes, half the log-odds
    flat = inputs.reshape(inputs.shape[0], -1) if isinstance(inputs, np.ndarray) else inputs
    tree = DecisionTreeRegressor(min_samples_leaf=cell_rows, random_state=seed).fit(flat, target)
    return np.unique(tree.apply(flat), return_inverse=True)[1]


def cell_fractions(counts: np.ndarray, cells: np.ndarray) -> np.ndarray:
    """Each row's (K,) label fractions of its cell, from the cells' (cells, K) noisy ``counts`` and their
    public sizes."""
    return histogram_priors(counts, np.bincount(cells, minlength=len(counts)))[cells]
