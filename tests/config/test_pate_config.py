"""PATE's settings (config/pate_config.py): the plan fills in the number of queries or the vote noise within
the budget, and refuses a plan the budget cannot pay."""

from __future__ import annotations

import pytest

from labeldp.accounting import pate_epsilon
from labeldp.config.pate_config import PATEConfig
from labeldp.errors import BudgetError


def test_plan_fills_in_queries_or_noise_within_the_budget():
    config = PATEConfig(teachers=100)
    queries, sigma = config.plan(1.0, 1e-5, 10_000)
    assert sigma == 25.0 and pate_epsilon(queries, sigma, 1e-5) <= 1.0 < pate_epsilon(queries + 1, sigma, 1e-5)
    queries, sigma = PATEConfig(teachers=100, queries=50).plan(1.0, 1e-5, 10_000)
    assert queries == 50 and pate_epsilon(50, sigma, 1e-5) <= 1.0
    with pytest.raises(BudgetError, match="cost epsilon"):
        PATEConfig(teachers=100, queries=5000, noise_std=10.0).plan(1.0, 1e-5, 10_000)
    with pytest.raises(BudgetError, match="does not pay for one query"):
        PATEConfig(teachers=4).plan(0.01, 1e-5, 10_000)
