"""Shared fixtures: one torch thread per test process, small datasets built in memory (a
classification and a regression), and methods registered for one test only (the helpers that test
modules import are in tests/helpers.py)."""

from __future__ import annotations

import os

# One thread per test process: pytest-xdist runs one worker per core, and torch's default of one
# thread per core in every worker oversubscribes the CPU (small ops then run ~10x slower).
os.environ["OMP_NUM_THREADS"] = "1"  # inherited by the CLI subprocesses the tests start

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)

from labeldp import runtime  # noqa: E402
from labeldp.data import LabeledDataset, regression_dataset  # noqa: E402
from tests.helpers import TOY_GRID  # noqa: E402


@pytest.fixture
def blobs() -> LabeledDataset:
    """10 well-separated Gaussian classes in 20 dimensions: 600 train, 200 test examples."""
    rng = np.random.default_rng(0)
    centers = rng.normal(0, 3, size=(10, 20))
    y_train, y_test = rng.integers(0, 10, 600), rng.integers(0, 10, 200)
    x_train = centers[y_train] + rng.normal(size=(600, 20))
    x_test = centers[y_test] + rng.normal(size=(200, 20))
    return LabeledDataset("blobs", x_train, y_train, x_test, y_test, num_classes=10)


@pytest.fixture(scope="module")
def toy() -> LabeledDataset:
    """A regression whose label is 10 + 3 x_0 + noise, clipped to [0, 20]; 400 train, 100 test."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(500, 4))
    values = 10 + 3 * x[:, 0] + rng.normal(size=500)
    return regression_dataset("toy", x[:400], values[:400], x[400:], values[400:], TOY_GRID)


@pytest.fixture
def register_for_test():
    """``register_method`` for one test: every name it registers (aliases included) is removed from
    the registry afterwards, so that no other test sees the test's methods. A name is removed only if
    it still stands for the test's method: a refused registration never takes a built-in with it."""
    from labeldp.methods import registry

    registered = []

    def register(method, *aliases):
        registered.extend((name, method) for name in (method.name, *aliases))
        return registry.register_method(method, *aliases)

    yield register
    for name, method in registered:
        if registry._REGISTRY.get(name) is method:
            del registry._REGISTRY[name]


@pytest.fixture
def restore_threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)
    runtime._AUTO = None


@pytest.fixture(autouse=True)
def budget_dir(tmp_path_factory):
    """Each test's dataset ledgers in a folder of its own (never the user's), inherited by the CLI
    subprocesses it starts; its own patch, which a test's ``monkeypatch.undo()`` leaves in place."""
    folder = tmp_path_factory.mktemp("budget")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LABELDP_BUDGET_DIR", str(folder))
        patch.delenv("LABELDP_TOTAL_EPSILON", raising=False)
        yield folder
