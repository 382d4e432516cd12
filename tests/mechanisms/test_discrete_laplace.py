"""Discrete Laplace and geometric noise (mechanisms/discrete_laplace.py): samples follow the exact pmf
(and the check rejects a wrong scale), and the geometric is never truncated nor identically zero."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from labeldp.mechanisms import discrete_laplace, discrete_laplace_pmf, geometric
from labeldp.randomness import SecureGenerator
from tests.helpers import frequencies_match


@pytest.mark.parametrize("parameter", [3.0, 0.5, 0.01])
def test_discrete_laplace_matches_its_exact_distribution(parameter: float) -> None:
    """Blocks of one value (large a) and of many (small a): chi-square against the exact pmf on the
    values of the middle, with both tails pooled."""
    samples = discrete_laplace(parameter, 200_000, rng=4)
    width = max(1, int(3 / parameter))
    support = np.arange(-width, width + 1)
    pmf = discrete_laplace_pmf(support, parameter)
    observed = np.concatenate(
        [
            [np.sum(samples < -width)],
            np.bincount(samples[np.abs(samples) <= width] + width, minlength=support.size),
            [np.sum(samples > width)],
        ]
    )
    tails = (1 - pmf.sum()) / 2
    expected = np.concatenate([[tails], pmf, [tails]]) * samples.size
    assert stats.chisquare(observed, expected).pvalue > 1e-4
    # the same check rejects a parameter 10% off
    wrong = discrete_laplace(parameter * 1.1, 200_000, rng=4)
    observed = np.concatenate(
        [
            [np.sum(wrong < -width)],
            np.bincount(wrong[np.abs(wrong) <= width] + width, minlength=support.size),
            [np.sum(wrong > width)],
        ]
    )
    assert stats.chisquare(observed, expected).pvalue < 1e-4


def test_geometric_noise_is_never_truncated_nor_identically_zero() -> None:
    """Uniforms of 0 continue the geometric forever in floating-point inversion; here every block is
    passed while they last, and with a parameter so large that e^-a underflows the noise can still
    move (with probability 2^-53 per block), so no discrete Laplace release becomes an identity."""

    class ZerosThenHalf(SecureGenerator):
        def __init__(self, zeros: int):
            super().__init__()
            self.calls = 0
            self.zeros = zeros

        def random(self, size=None):
            self.calls += 1
            return np.full(size, 0.0 if self.calls <= self.zeros else 0.5)

    assert geometric(800.0, 3, ZerosThenHalf(5)).tolist() == [4, 4, 4]  # blocks of 1, passed 4 times
    assert geometric(0.01, 2, ZerosThenHalf(3)).tolist() == [200, 200]  # blocks of 100, passed twice
    assert geometric(800.0, 1, rng=0).tolist() == [0]


@pytest.mark.parametrize("parameter", [0.05, 0.5, 2.0])
@pytest.mark.parametrize("rng", [0, "secure"])
def test_discrete_laplace_matches_its_pmf(parameter: float, rng) -> None:
    width = int(np.ceil(10 / parameter))
    expected = discrete_laplace_pmf(np.arange(-width, width + 1), parameter)
    tail = np.tanh(parameter / 2) * np.exp(-parameter * width) / (1 - np.exp(-parameter))  # Pr[X >= width]
    expected[0] = expected[-1] = tail  # the edge cells collect the tails
    assert expected.sum() == pytest.approx(1.0, abs=1e-9)
    samples = np.clip(discrete_laplace(parameter, (20000, 1), rng=rng), -width, width) + width
    # the secure draws are fresh on every run: over the 401 cells of parameter 0.05, exact tails at 5 sigma
    # fail a correct sampler once in 12,000 runs, at 6 sigma once in 3.5 million
    assert frequencies_match(samples, expected[None, :], sigmas=6.0).all()


def test_discrete_laplace_check_rejects_a_wrong_scale() -> None:
    expected = discrete_laplace_pmf(np.arange(-20, 21), 0.5)[None, :]
    samples = np.clip(discrete_laplace(0.6, (20000, 1), rng=0), -20, 20) + 20
    assert not frequencies_match(samples, expected, sigmas=6.0).all()  # 3 of 41 cells beyond 6 sigma
