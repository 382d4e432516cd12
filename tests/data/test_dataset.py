"""The dataset type (data/dataset.py, and data/splits.py, which has little logic and shares this
module): its arrays validated, a regression dataset keeping its raw test values and refusing
inconsistent fields, and the deterministic partition of the training set into stages."""

from __future__ import annotations

import numpy as np
import pytest

from labeldp.data import LabeledDataset


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(x_train=np.full((3, 2), np.nan)), "NaN"),
        (dict(y_train=np.array([0, 1])), "length mismatch"),
        (dict(y_train=np.array([0, 1, 5])), "must lie in"),
        (dict(x_train=np.zeros((0, 2)), y_train=np.zeros(0, dtype=int)), "empty"),
    ],
)
def test_dataset_validation(change, message) -> None:
    arrays = dict(
        x_train=np.zeros((3, 2)), y_train=np.array([0, 1, 2]), x_test=np.zeros((2, 2)), y_test=np.array([0, 1])
    )
    arrays.update(change)
    with pytest.raises(ValueError, match=message):
        LabeledDataset("t", num_classes=3, **arrays)
