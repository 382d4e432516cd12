"""The dataset type (data/dataset.py, and data/splits.py, which has little logic and shares this
module): its arrays validated, a regression dataset keeping its raw test values and refusing
inconsistent fields, and the deterministic partition of the training set into stages."""

from __future__ import annotations

import numpy as np
import pytest

from labeldp.boundary import unseal
from labeldp.data import LabeledDataset, label_grid, regression_dataset
from labeldp.errors import DataError
from labeldp.runs import split_stages


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


def test_regression_dataset_keeps_the_raw_test_values() -> None:
    x = np.zeros((4, 2))
    data = regression_dataset("r", x, [0.0, 3.2, 11.0, 5.0], x, [1.4, 2.6, -1.0, 7.5], label_grid(0, 10, 6))
    assert data.is_regression and data.num_classes == 6
    assert unseal(data.y_train).tolist() == [0, 2, 5, 2] and data.y_test.tolist() == [1, 1, 0, 4]
    assert data.test_values.tolist() == [1.4, 2.6, -1.0, 7.5]
    assert "label_values=[0 .. 10]" in repr(data)
    plain = LabeledDataset("c", x, [0, 1, 0, 1], x, [1, 0, 1, 0], num_classes=2)
    assert not plain.is_regression
    with pytest.raises(DataError, match="classification"):
        plain.test_values  # noqa: B018


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(label_values=[1.0, 2.0]), "num_classes"),
        (dict(label_values=[1.0, 3.0, 2.0]), "strictly increasing"),
        (dict(y_test_values=[1.0, 2.0]), "give label_values too"),
        (dict(label_values=[1.0, 2.0, 3.0], y_test_values=[1.0]), "one per test example"),
        (dict(categorical=(2, 9, 9)), "cover leading columns"),
        (dict(categorical=(1,)), "integer codes"),
    ],
)
def test_dataset_refuses_inconsistent_regression_fields(change, message) -> None:
    arrays = dict(
        x_train=np.array([[0.0, 1.5], [1.0, 0.0], [1.0, 2.0]]),
        y_train=np.array([0, 1, 2]),
        x_test=np.zeros((2, 2)),
        y_test=np.array([0, 1]),
    )
    with pytest.raises(DataError, match=message):
        LabeledDataset("t", num_classes=3, **arrays, **change)


def test_split_stages_is_a_deterministic_partition() -> None:
    parts = split_stages(1001, (0.3, 0.3, 0.4), seed=4)
    assert sorted(np.concatenate(parts).tolist()) == list(range(1001))
    assert all(abs(p.size - f * 1001) < 1 for p, f in zip(parts, (0.3, 0.3, 0.4)))
    assert all(np.array_equal(a, b) for a, b in zip(parts, split_stages(1001, (0.3, 0.3, 0.4), seed=4)))
