"""A numeric label's declared grid and the snapping onto it (data/grid.py)."""

from __future__ import annotations

import numpy as np
import pytest

from labeldp.data import label_grid, snap_to_grid
from labeldp.errors import ConfigError, DataError


def test_grid_and_snapping() -> None:
    grid = label_grid(0, 10, 11)
    assert np.array_equal(grid, np.arange(11.0))
    assert snap_to_grid([-3.0, 0.4, 0.5, 0.6, 9.7, 42.0], grid).tolist() == [0, 0, 0, 1, 10, 10]
    with pytest.raises(ConfigError, match="LOW < HIGH"):
        label_grid(5, 5, 3)
    with pytest.raises(ConfigError, match="at least 2 points"):
        label_grid(0, 1, 1)
    with pytest.raises(DataError, match="missing or infinite"):
        snap_to_grid([1.0, np.nan], grid)
