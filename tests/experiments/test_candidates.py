"""A tune's candidates (experiments/candidates.py): a random search draws distinct combinations
from its seed."""

from __future__ import annotations

from labeldp.experiments.release_tuning import candidate_options


def test_random_search_draws_distinct_combinations_from_the_seed() -> None:
    grid = {"lr": ["0.01", "0.02", "0.05"], "epochs": ["1", "2"]}
    picked = candidate_options(grid, trials=3, seed=4)
    assert len(picked) == 3 and len({tuple(c.items()) for c in picked}) == 3
    assert picked == candidate_options(grid, trials=3, seed=4)
    assert len(candidate_options(grid)) == 6
