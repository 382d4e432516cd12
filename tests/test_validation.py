"""Argument checks (_validation.py): a label outside its range is refused without naming it."""

from __future__ import annotations

import numpy as np
import pytest


def test_a_label_outside_its_range_is_refused_without_naming_it() -> None:
    from labeldp._validation import check_labels

    for bad in ([0, 1, 7], [0, -3, 1], [0.0, 1.5, 1.0]):
        with pytest.raises(ValueError) as refused:
            check_labels(np.array(bad), 2)
        assert not any(str(value) in str(refused.value) for value in (7, -3, 1.5))
