"""Privacy units: the labels of one person (or any declared id) protected together.

A guarantee per impression says little about a user who saw 200 ads. With a unit, neighbouring datasets
differ in every label of one unit. Its contribution is bounded by a public rule that reads no label: at
most ``max_rows`` rows a unit, chosen by a public seed (:func:`bound_contributions`), the others left out
of every release. A kept row is released with epsilon / c, c the most rows a unit has among the rows
read, and an aggregate release calibrates its noise to c rows; the ledger composes per unit. Everything
here reads the unit column and row positions only, both public.
"""

from __future__ import annotations

import numpy as np

from labeldp.errors import ConfigError
from labeldp.randomness import public_rng
from labeldp.tables.keys import canonical_codes


def unit_codes(values) -> np.ndarray:
    """Each row's unit as an int64 code in [0, units), in order of first appearance; ``7``, ``"7"`` and
    ``7.0`` are one unit. A missing unit raises :class:`~labeldp.errors.DataError`.
    """
    return canonical_codes(values, "the privacy unit column has missing values: every row needs its unit")


def check_max_rows(max_rows: int) -> int:
    """``max_rows`` as an int, refused unless a whole number of at least 1."""
    if int(max_rows) != max_rows or max_rows < 1:
        raise ConfigError(f"the most rows per privacy unit must be a whole number of at least 1, got {max_rows!r}")
    return int(max_rows)


def bound_contributions(units: np.ndarray, max_rows: int, seed: int) -> np.ndarray:
    """The sorted positions of the rows kept: at most ``max_rows`` of each unit, chosen uniformly among its rows
    from the units and the public ``seed`` only, never a label.
    """
    limit = check_max_rows(max_rows)
    units = np.asarray(units, dtype=np.int64)
    order = public_rng(seed, "unit-rows").permutation(units.size)  # a random order of the rows ...
    by_unit = order[np.argsort(units[order], kind="stable")]  # ... grouped by unit, random within each
    grouped = units[by_unit]
    starts = np.flatnonzero(np.r_[True, grouped[1:] != grouped[:-1]])
    rank = np.arange(units.size) - np.repeat(starts, np.diff(np.r_[starts, units.size]))
    return np.sort(by_unit[rank < limit])


def bounded_rows(units, max_rows: int, seed: int) -> tuple[np.ndarray, np.ndarray, int]:
    """The rows a release of per-unit ``units`` reads (:func:`bound_contributions`), their units coded among the
    kept rows alone, and c = min(``max_rows``, the largest unit's rows): each kept row gets epsilon / c.
    """
    codes = unit_codes(units)
    kept = bound_contributions(codes, max_rows, seed)
    kept_units = unit_codes(codes[kept])
    return kept, kept_units, int(np.bincount(kept_units, minlength=1).max())


def split_by_unit(units: np.ndarray, fraction: float, seed: int) -> np.ndarray:
    """Whether each row is held out: a random ``fraction`` of the units (public seed), every row of a unit on
    the same side, so that a unit's test and training rows are never released apart.
    """
    count = int(units.max()) + 1
    held = public_rng(seed, "unit-split").permutation(count)[: max(1, round(fraction * count))]
    chosen = np.zeros(count, dtype=bool)
    chosen[held] = True
    return chosen[units]


__all__ = ["bound_contributions", "bounded_rows", "check_max_rows", "split_by_unit", "unit_codes"]
