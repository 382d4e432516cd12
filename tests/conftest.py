"""Shared fixtures: one torch thread per test process, small datasets built in memory (a
classification and a regression), and methods registered for one test only (the helpers that test
modules import are in tests/helpers.py)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pytest

# One thread per test process: pytest-xdist runs one worker per core, and torch's default of one
# thread per core in every worker oversubscribes the CPU (small ops then run ~10x slower).
os.environ["OMP_NUM_THREADS"] = "1"  # inherited by the CLI subprocesses the tests start
# Spark's JVMs (a session, a cluster's daemons and executors) live for seconds on small tables: the quick
# compiler alone and one garbage collector's thread take a third less CPU than the defaults, beside the
# other worker
os.environ.setdefault("JDK_JAVA_OPTIONS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")

if TYPE_CHECKING:
    from labeldp.data import LabeledDataset


def pytest_configure(config) -> None:
    """One torch thread in each process that runs tests. pytest-xdist's controller runs none: without
    importing torch (seconds, before it starts its workers) it starts them sooner."""
    if hasattr(config, "workerinput") or config.getoption("dist", "no") == "no":
        import torch

        torch.set_num_threads(1)


#: the modules whose tests take longest, in seconds on one core (most of it starting Python processes:
#: torchrun's ranks, a sweep's workers, a CLI run to kill); each is started first by a worker of its own
SLOW_MODULES = {
    "tests/spark/test_cluster.py": 30,
    "tests/spark/test_release.py": 30,
    "tests/test_distributed.py": 24,
    "tests/test_typing.py": 20,
    "tests/test_docs.py": 24,
    "tests/experiments/test_sweep.py": 18,
    "tests/accounting/test_calibration.py": 17,
    "tests/cli/test_train.py": 17,
    "tests/ads/test_ddp.py": 16,
    "tests/test_plugins.py": 14,
    "tests/audit/test_label_inference.py": 12,
    "tests/dpsgd/test_selection.py": 11,
    "tests/accounting/test_datasets.py": 10,
    "tests/methods/test_dp_sgd.py": 9,
    "tests/test_threat_model.py": 7,
    "tests/cli/test_one_story.py": 7,
    "tests/test_docs_site.py": 6,
}


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items) -> None:
    """The slow modules first, shared among the workers: ``--dist worksteal`` gives each worker a run of
    the collection, in order (the first worker the first len // workers tests, the next the next), and
    later moves tests from the end of a busy worker's run to an idle one. Each run starts with its share
    of the slow modules (the slowest first, each to the run with the least so far) and ends with quick
    tests that balance the end. A module's tests stay together and in order (its module fixtures are set
    up once)."""
    workers = getattr(config, "workerinput", {}).get("workercount", 1)
    modules: dict[str, list] = {}
    for item in items:  # Spark's route and page beside the Spark tests: one session, warmed up once
        spark = "on Spark" in item.nodeid or "beyond-one-machine" in item.nodeid
        module = "tests/spark/test_release.py" if spark else item.nodeid.split("::")[0]
        modules.setdefault(module, []).append(item)
    slow = sorted((name for name in modules if name in SLOW_MODULES), key=lambda name: -SLOW_MODULES[name])
    runs: list[list] = [[] for _ in range(workers)]
    load = [0.0] * workers
    for name in slow:
        run = load.index(min(load))
        runs[run].extend(modules[name])
        load[run] += SLOW_MODULES[name]
    quick = [item for name, tests in modules.items() if name not in SLOW_MODULES for item in tests]
    ordered, left = [], len(items)
    for index, run in enumerate(runs):  # the sizes worksteal hands out: what is left over the workers left
        size = left // (workers - index)
        left -= size
        take = max(0, size - len(run))
        ordered += run + quick[:take]
        quick = quick[take:]
    items[:] = ordered + quick


@pytest.fixture
def blobs() -> LabeledDataset:
    """10 well-separated Gaussian classes in 20 dimensions: 600 train, 200 test examples."""
    import numpy as np

    from labeldp.data import LabeledDataset

    rng = np.random.default_rng(0)
    centers = rng.normal(0, 3, size=(10, 20))
    y_train, y_test = rng.integers(0, 10, 600), rng.integers(0, 10, 200)
    x_train = centers[y_train] + rng.normal(size=(600, 20))
    x_test = centers[y_test] + rng.normal(size=(200, 20))
    return LabeledDataset("blobs", x_train, y_train, x_test, y_test, num_classes=10)


@pytest.fixture(scope="module")
def toy() -> LabeledDataset:
    """A regression whose label is 10 + 3 x_0 + noise, clipped to [0, 20]; 400 train, 100 test."""
    import numpy as np

    from labeldp.data import regression_dataset
    from tests.helpers import TOY_GRID

    rng = np.random.default_rng(0)
    x = rng.normal(size=(500, 4))
    values = 10 + 3 * x[:, 0] + rng.normal(size=500)
    return regression_dataset("toy", x[:400], values[:400], x[400:], values[400:], TOY_GRID)


@pytest.fixture
def register_for_test():
    """``register_method`` for one test: every name it registers (aliases included) is removed from
    the registry afterwards, so that no other test sees the test's methods. A name is removed only if
    it still stands for the test's method: a refused registration never takes a built-in with it."""
    from labeldp.config import method_registry as registry

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
    import torch

    from labeldp import runtime

    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)
    runtime._AUTO = None


@pytest.fixture(scope="session", autouse=True)
def session_budget_dir(tmp_path_factory):
    """The dataset ledgers of module and session fixtures (set up before any test's own folder) in a
    folder of the session's, never the user's: a torchrun launch of a module's fixture writes there."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LABELDP_BUDGET_DIR", str(tmp_path_factory.mktemp("session-budget")))
        patch.delenv("LABELDP_TOTAL_EPSILON", raising=False)
        yield


@pytest.fixture(autouse=True)
def budget_dir(tmp_path_factory):
    """Each test's dataset ledgers in a folder of its own (never the user's), inherited by the CLI
    subprocesses it starts; its own patch, which a test's ``monkeypatch.undo()`` leaves in place."""
    folder = tmp_path_factory.mktemp("budget")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LABELDP_BUDGET_DIR", str(folder))
        patch.delenv("LABELDP_TOTAL_EPSILON", raising=False)
        yield folder
