"""Printing privacy figures so that rounding never flatters them: an epsilon (a guarantee) is rounded
up, an empirical lower bound (what an attack showed) down."""

from __future__ import annotations

import math

#: significant digits of a printed epsilon
EPSILON_DIGITS = 3


def round_up(value: float, digits: int = EPSILON_DIGITS) -> float:
    """``value`` rounded up to ``digits`` significant digits (0, infinities and NaN unchanged)."""
    if value == 0 or not math.isfinite(value):
        return value
    rounded = float(f"{value:.{digits}g}")
    if rounded < value:
        step = 10.0 ** (math.floor(math.log10(abs(rounded))) - digits + 1)
        rounded = float(f"{rounded + step:.{digits}g}")
    return rounded


def format_epsilon(epsilon: float | None, digits: int = EPSILON_DIGITS) -> str:
    """An epsilon for people, rounded up (``inf`` for None or infinity: no privacy)."""
    if epsilon is None or math.isinf(epsilon):
        return "inf"
    return f"{round_up(epsilon, digits):.{digits}g}"


def format_lower_bound(value: float, decimals: int = 3) -> str:
    """An empirical epsilon lower bound, rounded down to exactly ``decimals`` decimals."""
    return f"{math.floor(value * 10**decimals) / 10**decimals:.{decimals}f}"


__all__ = ["EPSILON_DIGITS", "format_epsilon", "format_lower_bound", "round_up"]
