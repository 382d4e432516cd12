"""The noise generators (randomness.py): the secure generator's integers are uniform and its normals
normal."""

from __future__ import annotations

import numpy as np
from scipy import stats

from labeldp.randomness import SecureGenerator, as_generator


def test_secure_integers_are_uniform() -> None:
    gen = as_generator("secure")
    draws = gen.integers(0, np.array([3, 7] * 20000)).reshape(-1, 2)
    for column, high in ((0, 3), (1, 7)):
        counts = np.bincount(draws[:, column], minlength=high)
        assert counts.size == high
        assert np.all(np.abs(counts / 20000 - 1 / high) < 5 * np.sqrt((1 / high) / 20000))
    values = gen.random(10000)
    assert 0 <= values.min() and values.max() < 1 and abs(values.mean() - 0.5) < 0.02


def test_secure_generator_draws_normals():
    draws = SecureGenerator().normal(1.0, 3.0, size=20001)
    assert draws.shape == (20001,)
    # fresh secure draws on every run: a correct generator fails this level once in a million runs
    assert stats.kstest(draws, stats.norm(1.0, 3.0).cdf).pvalue > 1e-6
    assert stats.kstest(draws, stats.norm(1.0, 2.7).cdf).pvalue < 1e-6  # the test sees a 10% smaller std
