"""Argument checks (_validation.py): a label outside its range is refused without naming it."""

from __future__ import annotations

import numpy as np
import pytest


def test_a_label_outside_its_range_is_refused_without_naming_it() -> None:
    from labeldp._validation import check_labels

    for bad in ([0, 1, 7], [0, -3, 1], [0.0, 1.5, 1.0]):
        with pytest.raises(ValueError) as refused:
            check_labels(np.array(bad), 2)
        assert not any(str(value) in str(refused.value) for value in (7, -3, 1.5))


@pytest.mark.parametrize(
    ("problems", "message"),
    [
        ({7: np.nan}, "NaN or infinite"),
        ({50000: np.inf, 3: -0.5}, "NaN or infinite"),  # the first problem of the whole array, not of a block
        ({3: -np.inf}, "row 3 has a negative entry"),
        ({45000: -0.5, 40000: 0.3}, "row 45000 has a negative entry"),
        ({40000: 0.3}, "row 40000 sums to"),
    ],
)
def test_priors_checked_in_blocks_are_refused_as_the_whole_array_would_be(problems: dict, message: str) -> None:
    """Priors are checked a block at a time; a block with a problem is refused by the whole array's
    check, so the message names the array's first problem (its row counted from the array's start)."""
    from labeldp import _validation
    from labeldp.errors import ConfigError

    priors = np.random.default_rng(0).dirichlet(np.ones(7), size=60000)
    assert len(priors) * 7 > 2 * _validation._CHECK_ENTRIES  # several blocks
    np.testing.assert_array_equal(_validation.check_priors(priors), priors)
    for row, value in problems.items():
        priors[row, 2] = value
    with pytest.raises(ConfigError, match=message):
        _validation.check_priors(priors)


@pytest.mark.parametrize("num_classes", [3, 10, 40])
def test_priors_checked_in_blocks_accept_exactly_what_the_whole_array_check_accepts(
    num_classes: int, monkeypatch
) -> None:
    """A block's row sums may round differently from the whole array's (BLAS splits the work by the
    array's shape): rows that sum to 1 + atol up to rounding, each at a different place in its block,
    are accepted exactly where every row of ``priors @ ones`` is within atol of 1, as before the blocks."""
    from labeldp import _validation
    from labeldp.errors import ConfigError

    monkeypatch.setattr(_validation, "_CHECK_ENTRIES", 7 * num_classes)  # blocks of 7 rows
    rng = np.random.default_rng(num_classes)
    priors = rng.dirichlet(np.ones(num_classes), size=64)
    ones = np.ones(num_classes)
    disagreements = []
    for trial in range(600):
        row = trial % len(priors)
        kept = priors[row].copy()
        edge = rng.random(num_classes)
        priors[row] = edge * ((1 + rng.choice([-1, 1]) * 1e-6) / edge.sum())  # on the tolerance's edge
        whole_accepts = bool(np.all(np.abs(priors @ ones - 1.0) <= 1e-6))
        try:
            _validation.check_priors(priors)
            accepted = True
        except ConfigError:
            accepted = False
        if accepted != whole_accepts:
            disagreements.append((row, priors[row].tolist(), whole_accepts))
        priors[row] = kept
    assert not disagreements
