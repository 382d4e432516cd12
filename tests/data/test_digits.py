"""The embedded digits (data/digits.py): a fixed dataset, split without looking at its labels."""

from __future__ import annotations

import numpy as np

from labeldp.boundary import unseal
from labeldp.data import load_dataset


def test_embedded_digits_is_fixed_and_split_without_looking_at_labels(monkeypatch) -> None:
    first, second = load_dataset("digits"), load_dataset("digits")
    assert len(first.y_train) == 1347 and len(first.y_test) == 450
    assert np.array_equal(unseal(first.y_train), unseal(second.y_train))
    # the split depends on the images' positions only: other labels give the same split of the images
    import sklearn.datasets

    real = sklearn.datasets.load_digits

    def relabelled():
        bunch = real()
        bunch.target = (bunch.target + np.arange(bunch.target.size)) % 10
        return bunch

    monkeypatch.setattr("labeldp.data.digits.load_digits", relabelled)
    assert np.array_equal(load_dataset("digits").x_test, first.x_test)
