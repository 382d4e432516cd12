"""Helpers that test modules in several folders import: a statistical check of sampled frequencies
against their exact probabilities, the devices a computation is checked on, an attack on private
labels held in memory, small folders in the real formats of the MNIST family and MovieLens, and the
closed-form epsilon of a Gaussian mechanism, a configuration from flat fields."""

from __future__ import annotations

import dataclasses
import gzip
import json
import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from scipy import stats
from scipy.optimize import brentq

from labeldp.config.run_config import RunConfig
from labeldp.config.train_config import TrainConfig
from labeldp.data import label_grid

#: the grid of the ``toy`` regression (tests/conftest.py): 11 points over [0, 20]
TOY_GRID = label_grid(0, 20, 11)

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


def poison_in_place(labels) -> None:
    """Permute private labels where they are kept (every holder of them sees the change): an attack on
    code that should have stopped reading them."""
    values = labels._root.values
    values[:] = np.random.default_rng(0).permutation(values)


def write_idx(path, array: np.ndarray, compress: bool) -> None:
    header = bytes([0, 0, 0x08, array.ndim]) + b"".join(int(d).to_bytes(4, "big") for d in array.shape)
    payload = header + array.astype(np.uint8).tobytes()
    if compress:
        with gzip.open(str(path) + ".gz", "wb") as handle:
            handle.write(payload)
    else:
        path.write_bytes(payload)


def make_mnist_folder(folder, n_train=50, n_test=20, compress=True) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    folder.mkdir(parents=True, exist_ok=True)
    train_labels = rng.integers(0, 10, n_train)
    write_idx(folder / "train-images-idx3-ubyte", rng.integers(0, 256, (n_train, 28, 28)), compress)
    write_idx(folder / "train-labels-idx1-ubyte", train_labels, compress)
    write_idx(folder / "t10k-images-idx3-ubyte", rng.integers(0, 256, (n_test, 28, 28)), compress)
    write_idx(folder / "t10k-labels-idx1-ubyte", rng.integers(0, 10, n_test), compress)
    return train_labels, None


OCCUPATIONS = ["administrator", "artist", "student", "other"]


def write_movielens(
    folder,
    users: int = 12,
    items: int = 15,
    ratings: int = 150,
    seed: int = 0,
    shuffle: int | None = None,
    rating_offset: int = 0,
) -> pd.DataFrame:
    """A small MovieLens folder: u.data (tab-separated), u.item and u.user ('|'), u.occupation."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    pairs = rng.choice(users * items, size=ratings, replace=False)
    data = pd.DataFrame(
        {
            "user": pairs // items + 1,
            "item": pairs % items + 1,
            "rating": (rng.integers(1, 6, ratings) + rating_offset - 1) % 5 + 1,
            "timestamp": rng.integers(8e8, 9e8, ratings),
        }
    )
    if shuffle is not None:
        data = data.sample(frac=1.0, random_state=shuffle)
    data.to_csv(folder / "u.data", sep="\t", header=False, index=False)
    lines = []
    for item in range(1, items + 1):
        date = "" if item == 3 else f"01-Jan-{1950 + item}"
        genres = "|".join(str(int(g)) for g in rng.integers(0, 2, 19))
        lines.append(f"{item}|Movie {item} ({1950 + item})|{date}||http://example.org/{item}|{genres}")
    (folder / "u.item").write_text("\n".join(lines) + "\n", encoding="latin-1")
    people = [f"{u}|{20 + u}|{'MF'[u % 2]}|{OCCUPATIONS[u % 4]}|0000{u}" for u in range(1, users + 1)]
    people[0] = "1|33|X|astronaut|00001"  # a gender and an occupation outside the lists
    (folder / "u.user").write_text("\n".join(people) + "\n")
    (folder / "u.occupation").write_text("\n".join(OCCUPATIONS) + "\n")
    return data


def analytic_gaussian_epsilon(mu: float, delta: float) -> float:
    """Epsilon of a Gaussian mechanism with sensitivity/noise ratio mu (Balle & Wang 2018, Thm 8)."""

    def excess(eps):
        return stats.norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2) - delta

    return brentq(excess, 0.0, 100.0)


def write_table(path, rows: int = 60, **extra) -> None:
    """A small two-class table: numeric features ``a`` and ``b``, a text column ``c``, label ``label``."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        {
            "a": rng.normal(size=rows),
            "b": rng.normal(size=rows),
            "c": rng.choice(["x", "y"], size=rows),
            "label": np.tile([0, 1], rows // 2),
            **extra,
        }
    )
    frame.to_csv(path, index=False)


def config_of(**fields) -> RunConfig:
    """A RunConfig from flat fields, as config.json records them: the method's options among them are its options."""
    shared = {field.name for field in dataclasses.fields(RunConfig)}
    options = {name: fields.pop(name) for name in list(fields) if name not in shared}
    return RunConfig(**fields, options=options)


def table_config(path, **overrides) -> RunConfig:
    return RunConfig(
        dataset="csv",
        table=str(path),
        classes=("0", "1"),
        method="lp-1st",
        epsilon=1.0,
        train=TrainConfig(epochs=1, batch_size=16),
        **overrides,
    )


def run_two_ranks(worker, arguments: list[str], results, extra_env: dict[str, str] | None = None) -> list[dict]:
    """Launch ``worker`` under ``torchrun --nproc_per_node 2`` (one thread a process, labeldp's sources
    first on the path), fail the test after 180 s or on a non-zero exit with the launch's output, and
    return what each rank wrote to ``results/rank{r}.json``."""
    source = Path(__file__).resolve().parents[1] / "src"
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        **(extra_env or {}),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(source), os.environ.get("PYTHONPATH")])),
    }
    launch = subprocess.Popen(
        [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--standalone", str(worker)]
        + arguments,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = launch.communicate(timeout=180)
    except subprocess.TimeoutExpired:
        os.killpg(launch.pid, signal.SIGKILL)  # torchrun and the workers it started
        output, _ = launch.communicate()
        pytest.fail(f"torchrun did not finish in 180 s:\n{output[-3000:]}")
    assert launch.returncode == 0, output[-5000:]
    return [json.loads((Path(results) / f"rank{r}.json").read_text()) for r in range(2)]
