"""Privacy units: the labels of one person (or any declared id) protected together.

An ads team's unit of privacy is a user with many impressions: a guarantee per impression says little
about someone who saw 200 ads. With a privacy unit, neighbouring datasets differ in the labels of every
row of one unit, and the stated epsilon holds for that unit.

The contribution of a unit is bounded by a public rule that never reads a label: at most
``max_rows`` rows per unit are kept, chosen uniformly at random among the unit's rows by the public
seed (:func:`bound_contributions`); the other rows are left out of every release. Each kept row is then
released with epsilon / c, c the most rows a unit has among the rows a release reads
(:meth:`labeldp.accounting.PrivacyLedger.contribution`), and an aggregate release (a histogram, label
marginals) calibrates its noise to c rows; the ledger composes per unit (its ``units``) and reports the
worst unit, with each row's own epsilon beside it.

Everything here reads the unit column and the row positions only, which are public.
"""

from __future__ import annotations

import numpy as np

from labeldp.boundary.keys import canonical_codes
from labeldp.errors import ConfigError
from labeldp.randomness import public_rng


def unit_codes(values) -> np.ndarray:
    """The unit of each row as an int64 code in [0, number of units), in order of first appearance;
    ``7``, ``"7"`` and ``7.0`` are one unit (:func:`~labeldp.boundary.keys.canonical_codes`).

    Raises
    ------
    labeldp.errors.DataError
        If a value is missing (a row without a unit cannot be bounded).
    """
    return canonical_codes(values, "the privacy unit column has missing values: every row needs its unit")


def check_max_rows(max_rows: int) -> int:
    """``max_rows`` as a positive int.

    Parameters
    ----------
    max_rows : int
        The most rows kept per unit.

    Returns
    -------
    int
        ``max_rows``.

    Raises
    ------
    labeldp.errors.ConfigError
        If it is not a whole number of at least 1.
    """
    if int(max_rows) != max_rows or max_rows < 1:
        raise ConfigError(f"the most rows per privacy unit must be a whole number of at least 1, got {max_rows!r}")
    return int(max_rows)


def bound_contributions(units: np.ndarray, max_rows: int, seed: int) -> np.ndarray:
    """The rows kept: at most ``max_rows`` of each unit, chosen uniformly at random among its rows.

    The choice depends on the units, the number of rows and the public ``seed`` only, never on a label.

    Parameters
    ----------
    units : numpy.ndarray
        (n,) each row's unit code (:func:`unit_codes`).
    max_rows : int
        The most rows kept per unit.
    seed : int
        The public seed.

    Returns
    -------
    numpy.ndarray
        The kept rows' positions, sorted.

    Raises
    ------
    labeldp.errors.ConfigError
        If ``max_rows`` is not a positive whole number.
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
    """The rows a release of per-unit ``units`` reads, and what its accounting needs: the kept rows
    (:func:`bound_contributions`), their units as codes of the kept rows alone, and c, the most rows a
    unit keeps (each kept row is released with epsilon / c).

    Parameters
    ----------
    units : array_like
        (n,) each row's unit (any hashable values, or 64-bit keys of them); public.
    max_rows : int
        The most rows kept per unit.
    seed : int
        The public seed.

    Returns
    -------
    kept : numpy.ndarray
        The kept rows' positions, sorted.
    kept_units : numpy.ndarray
        (kept.size,) int64 unit codes of the kept rows, in [0, number of units).
    most_rows : int
        c = min(``max_rows``, the largest unit's rows).

    Raises
    ------
    labeldp.errors.ConfigError
        If ``max_rows`` is not a positive whole number.
    labeldp.errors.DataError
        If a row has no unit.
    """
    codes = unit_codes(units)
    kept = bound_contributions(codes, max_rows, seed)
    kept_units = unit_codes(codes[kept])
    return kept, kept_units, int(np.bincount(kept_units, minlength=1).max())


def split_by_unit(units: np.ndarray, fraction: float, seed: int) -> np.ndarray:
    """Whether each row is held out, every row of a unit on the same side: a random ``fraction`` of the
    units (public seed), so that a unit's test rows and training rows are never released apart.

    Parameters
    ----------
    units : numpy.ndarray
        (n,) each row's unit code.
    fraction : float
        The share of units held out, in (0, 1).
    seed : int
        The public seed.

    Returns
    -------
    numpy.ndarray
        (n,) boolean: held out.
    """
    count = int(units.max()) + 1
    held = public_rng(seed, "unit-split").permutation(count)[: max(1, round(fraction * count))]
    chosen = np.zeros(count, dtype=bool)
    chosen[held] = True
    return chosen[units]


__all__ = ["bound_contributions", "bounded_rows", "check_max_rows", "split_by_unit", "unit_codes"]
