"""Printed privacy figures (accounting/rounding.py): an epsilon is rounded up, an empirical lower
bound down, so that a printed figure never flatters the guarantee."""

from __future__ import annotations

import numpy as np


def test_printed_epsilons_are_rounded_up_and_lower_bounds_down() -> None:
    """A printed guarantee is never below the true epsilon, a printed attack never above what it showed."""
    from labeldp.accounting.rounding import format_epsilon, format_lower_bound

    assert format_epsilon(1.0004) == "1.01" and format_epsilon(0.99951) == "1" and format_epsilon(2.0) == "2"
    assert format_epsilon(12.34) == "12.4" and format_epsilon(0.012341) == "0.0124" and format_epsilon(None) == "inf"
    for value in np.random.default_rng(0).uniform(0, 20, 1000):
        assert float(format_epsilon(value)) >= value and float(format_lower_bound(value)) <= value
    assert format_lower_bound(1.9999) == "1.999"
