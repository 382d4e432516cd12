"""The audit's statistics (audit/bounds.py): epsilon from an attack's precision, Clopper-Pearson
bounds, and the correction for the number of thresholds tried."""

from __future__ import annotations

import math

import pytest

from labeldp.audit import clopper_pearson_lower, epsilon_from_precision, epsilon_lower_bound
from labeldp.mechanisms import keep_probability


def test_bound_formulas() -> None:
    assert epsilon_from_precision(keep_probability(1.5, 10), 10) == pytest.approx(1.5)
    assert epsilon_from_precision(0.05, 10) == 0.0 and epsilon_from_precision(1.0, 10) == math.inf
    assert clopper_pearson_lower(0, 10, 0.05) == 0.0
    assert clopper_pearson_lower(10, 10, 0.05) == pytest.approx(0.05 ** (1 / 10))
    assert epsilon_lower_bound(0, 0, 10) == 0.0
    # more thresholds tried -> a weaker (smaller) bound for the same counts
    assert epsilon_lower_bound(90, 100, 10, num_tests=7) < epsilon_lower_bound(90, 100, 10, num_tests=1)
