"""A label column released in memory (boundary/column.py): labeldp.privatize with a shared prior and
pandas labels, distinct ids required before anything is drawn."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from labeldp.boundary import column as column_module
from labeldp.boundary import privatize
from labeldp.errors import ConfigError, DataError
from labeldp.mechanisms import rr_with_prior_probabilities
from labeldp.randomness import NoiseSource


def test_in_memory_release_of_pandas_labels_with_a_shared_prior() -> None:
    labels = pd.Series(["no", "yes", "yes", "maybe"] * 50, index=[f"user{i}" for i in range(200)])
    prior = [0.2, 0.5, 0.3]
    release = privatize(
        labels, classes=["maybe", "no", "yes"], epsilon=1.5, priors=prior, noise=NoiseSource(secure=True)
    )
    assert release.ids[0] == "user0" and set(release.values) <= {"maybe", "no", "yes"}
    assert release.mechanism == "rr-with-prior" and np.all(release.k == release.k[0])
    matrix = rr_with_prior_probabilities(np.array([prior]), 1.5)[0]
    np.testing.assert_allclose(release.matrix(), matrix)
    np.testing.assert_allclose(release.channel(), matrix[:, release.labels].T)
    with pytest.raises(ConfigError, match="shape"):
        privatize(labels, classes=["maybe", "no", "yes"], epsilon=1.0, priors=np.full((3, 3), 1 / 3))


# ----------------------------------------------------------------------------------------------------
# Each row once: duplicated ids are refused before anything is drawn


def _no_draws(monkeypatch) -> None:
    def draw(*args):
        raise AssertionError("a label was drawn")

    monkeypatch.setattr(column_module, "keyed_randomized_response", draw)
    monkeypatch.setattr(column_module, "keyed_rr_with_prior", draw)


def test_in_memory_ids_must_be_distinct(monkeypatch) -> None:
    labels = np.array([0, 1, 1, 0])
    _no_draws(monkeypatch)
    with pytest.raises(DataError, match="duplicated values.*'b'"):
        privatize(labels, classes=[0, 1], epsilon=1.0, ids=["a", "b", "c", "b"])
    series = pd.Series(labels, index=[10, 11, 10, 12])
    with pytest.raises(DataError, match="ids="):
        privatize(series, classes=[0, 1], epsilon=1.0)
    monkeypatch.undo()
    release = privatize(series, classes=[0, 1], epsilon=1.0, ids=["a", "b", "c", "d"])
    assert list(release.ids) == ["a", "b", "c", "d"]
