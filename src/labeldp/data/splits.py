"""Public splits of a dataset's examples: by position, from the seed's public streams, never by label."""

from __future__ import annotations

import numpy as np

from labeldp.randomness import public_rng


def split_stages(num_examples: int, fractions: tuple[float, ...], seed: int) -> list[np.ndarray]:
    """Disjoint random index sets with the given size fractions: the examples of each stage, drawn
    from the seed's public stream (they depend on positions only, never on labels).

    Parameters
    ----------
    num_examples : int
        The number of examples to split.
    fractions : tuple of float
        The share of the examples in each stage, in order (summing to at most 1; examples beyond the
        shares' sum belong to no stage).
    seed : int
        The public seed whose ``"stage-split"`` stream draws the permutation.

    Returns
    -------
    list of numpy.ndarray
        One sorted array of example indices per stage, disjoint, of about ``fraction * num_examples`` each.
    """
    order = public_rng(seed, "stage-split").permutation(num_examples)
    bounds = np.round(np.cumsum((0.0,) + fractions) * num_examples).astype(int)
    return [np.sort(order[bounds[i] : bounds[i + 1]]) for i in range(len(fractions))]


__all__ = ["split_stages"]
