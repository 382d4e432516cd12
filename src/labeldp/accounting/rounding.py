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


def format_epsilon(epsilon: float | str | None, digits: int = EPSILON_DIGITS) -> str:
    """An epsilon for people, rounded up (``inf`` for None or infinity, however stored: no privacy)."""
    value = read_epsilon(epsilon)
    return "inf" if math.isinf(value) else f"{round_up(value, digits):.{digits}g}"


def stored_epsilon(epsilon: float) -> float | str:
    """An epsilon as a file stores it: rounded up to 1e-6, ``"inf"`` for no privacy (printed alike)."""
    return "inf" if math.isinf(epsilon) else math.ceil(epsilon * 1e6) / 1e6


def read_epsilon(value: float | str | None) -> float:
    """An epsilon as stored (:func:`stored_epsilon`, or None in files written before it) as a number."""
    return math.inf if value is None or value == "inf" else float(value)


def describe_guarantee(epsilon, delta: float, per: str, relation: str, row_epsilon=None) -> str:
    """A guarantee in the one wording every console line uses: ``epsilon 1 per user (0.25 per row; delta 0,
    replace-one label)``."""
    row = "" if row_epsilon is None or per in ("row", "example") else f"{format_epsilon(row_epsilon)} per row; "
    return f"epsilon {format_epsilon(epsilon)} per {per} ({row}delta {delta:g}, {relation})"


def format_lower_bound(value: float, decimals: int = 3) -> str:
    """An empirical epsilon lower bound, rounded down to exactly ``decimals`` decimals."""
    return f"{math.floor(value * 10**decimals) / 10**decimals:.{decimals}f}"


__all__ = [
    "EPSILON_DIGITS",
    "describe_guarantee",
    "format_epsilon",
    "format_lower_bound",
    "read_epsilon",
    "round_up",
    "stored_epsilon",
]
