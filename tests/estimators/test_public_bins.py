"""Public bins of the features (estimators/public_bins.py): missing and unseen values go to bin zero."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from labeldp.errors import ConfigError
from labeldp.estimators.public_bins import PublicBins


def test_public_bins_put_missing_and_unseen_values_in_bin_zero() -> None:
    train = pd.DataFrame(
        {"x": [1.0, 2.0, 3.0, 4.0, np.nan], "c": ["a", "b", "a", None, "b"], "flag": [True, False, True, True, False]}
    )
    bins = PublicBins(2).fit(train)
    assert list(bins.bins_per_feature_) == [3, 3, 3]  # x: missing, <= median, > median; c: missing, a, b
    codes = bins.transform(pd.DataFrame({"x": [np.nan, 1.0, 9.0], "c": ["z", "a", None], "flag": [False, True, None]}))
    assert codes.tolist() == [[0, 0, 1], [1, 1, 2], [2, 0, 0]]
    with pytest.raises(ConfigError, match="lacks the fitted feature columns"):
        bins.transform(train.drop(columns="c"))
    mixed = PublicBins().fit(pd.DataFrame({"c": [1, "1", "a", None]}, dtype=object))
    assert list(mixed.bins_per_feature_) == [3]  # 1 and "1" are one category
    assert mixed.transform(pd.DataFrame({"c": ["1", 1, "a"]}, dtype=object)).ravel().tolist() == [1, 1, 2]
    assert bins.transform(pd.DataFrame({"x": [2.0], "c": ["a"], "flag": [1]})).tolist() == [[1, 1, 2]]  # 1 is True
