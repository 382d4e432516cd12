"""Public splits of a dataset's examples: by position, from the seed's public streams, never by label."""

from __future__ import annotations

import numpy as np

from labeldp.randomness import public_rng


def split_stages(
    num_examples: int, fractions: tuple[float, ...], seed: int, units: np.ndarray | None = None
) -> list[np.ndarray]:
    """Disjoint, sorted index sets of the given size ``fractions`` (summing to at most 1), drawn from the seed's
    public ``"stage-split"`` stream: they depend on positions only, never on labels.

    With privacy ``units``, whole units are split (taken in a random order until a stage holds its share),
    so each stage's release spends the run's epsilon on a unit once.
    """
    bounds = np.round(np.cumsum((0.0,) + tuple(fractions)) * num_examples).astype(int)
    if units is None:
        order = public_rng(seed, "stage-split").permutation(num_examples)
        return [np.sort(order[bounds[i] : bounds[i + 1]]) for i in range(len(fractions))]
    units = np.asarray(units, dtype=np.int64)
    unit_order = public_rng(seed, "stage-split").permutation(int(units.max()) + 1)
    sizes = np.bincount(units, minlength=unit_order.size)[unit_order]
    middles = np.cumsum(sizes) - sizes / 2  # each unit's middle row, the units laid out in random order
    stage_of = np.full(unit_order.size, -1)
    stage_of[unit_order] = np.searchsorted(bounds, middles, side="right") - 1  # beyond the last bound: none
    stage = stage_of[units]
    return [np.flatnonzero(stage == i) for i in range(len(fractions))]


__all__ = ["split_stages"]
