"""Shared fixtures: small datasets built in memory, and statistical helpers."""

from __future__ import annotations

import os

# One thread per test process: pytest-xdist runs one worker per core, and torch's default of one
# thread per core in every worker oversubscribes the CPU (small ops then run ~10x slower).
os.environ["OMP_NUM_THREADS"] = "1"  # inherited by the CLI subprocesses the tests start

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from scipy import stats  # noqa: E402

torch.set_num_threads(1)

from labeldp.data import LabeledDataset  # noqa: E402

#: devices for tests that check a computation on each: the CPU, and a CUDA GPU where torch sees one
#: (skipped elsewhere, e.g. in CI; runs that leave the device on "auto" use the GPU there anyway)
DEVICES = [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")),
]


def frequencies_match(samples: np.ndarray, expected: np.ndarray, sigmas: float = 5.0) -> np.ndarray:
    """Boolean array: is each cell's count of ``samples`` outside both tails of its exact
    Binomial(n_draws, expected probability) distribution that hold less probability than a normal
    beyond ``sigmas`` standard deviations? ``samples`` has shape (n_draws, m) of values in [0, K);
    ``expected`` (m, K). Exact tails, not a normal approximation: cells expecting a handful of
    counts have heavy right tails, where a normal band fails a correct sampler far too often."""
    draws, m = samples.shape
    num_classes = expected.shape[1]
    counts = np.zeros((m, num_classes))
    np.add.at(counts, (np.broadcast_to(np.arange(m), samples.shape), samples), 1)
    tail = stats.norm.sf(sigmas)
    probabilities = np.clip(expected, 0.0, 1.0)
    at_most = stats.binom.cdf(counts, draws, probabilities)  # P[X <= count]
    at_least = stats.binom.sf(counts - 1, draws, probabilities)  # P[X >= count]
    return (at_most > tail) & (at_least > tail)


@pytest.fixture
def blobs() -> LabeledDataset:
    """10 well-separated Gaussian classes in 20 dimensions: 600 train, 200 test examples."""
    rng = np.random.default_rng(0)
    centers = rng.normal(0, 3, size=(10, 20))
    y_train, y_test = rng.integers(0, 10, 600), rng.integers(0, 10, 200)
    x_train = centers[y_train] + rng.normal(size=(600, 20))
    x_test = centers[y_test] + rng.normal(size=(200, 20))
    return LabeledDataset("blobs", x_train, y_train, x_test, y_test, num_classes=10)


def poison_in_place(labels) -> None:
    """Permute private labels where they are kept (every holder of them sees the change): an attack on
    code that should have stopped reading them."""
    values = labels._root.values
    values[:] = np.random.default_rng(0).permutation(values)
