"""A label column released on Dask (boundary/on_dask.py through boundary/engines.py, the steps Spark runs too:
tests/spark/): the one-process route's release under the same key, RR's exact distribution, the same labels
whatever the partitions or however often the graph is computed, per-unit bounds, every refusal before the
first draw, on the people's ledgers."""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

import labeldp.boundary.engines as engines
from labeldp import load_release, privatize_table
from labeldp.accounting.datasets import ledgers
from labeldp.accounting.policy import BudgetPolicy
from labeldp.boundary.batches import BatchRelease
from labeldp.errors import ConfigError, DataError, ReleaseExistsError
from labeldp.mechanisms import randomized_response_probabilities
from labeldp.randomness import NoiseSource
from tests.helpers import frequencies_match

dd = pytest.importorskip("dask.dataframe")
pytestmark = pytest.mark.filterwarnings("ignore:The inplace keyword")  # inside dask's Parquet writer, pandas 3
CLASSES = (0, 1, 2, 3)


def _table(rows: int = 4000) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    prior = rng.dirichlet(np.ones(4), rows)
    columns = {"id": np.arange(rows) * 7 + 3, "user": rng.integers(0, 50, rows), "y": np.arange(rows) % 4}
    return pd.DataFrame(columns | {f"p{j}": prior[:, j] for j in range(4)})


def _released(folder) -> pd.Series:
    release = load_release(folder)
    return pd.Series(release.labels, index=release.ids).sort_index()


def test_the_release_is_the_one_process_route_s_and_follows_rr(tmp_path) -> None:
    table = _table()
    table.to_parquet(tmp_path / "t.parquet")
    for priors in (None, ["p0", "p1", "p2", "p3"]):
        options = dict(label_column="y", id_column="id", classes=CLASSES, epsilon=1.0, prior_columns=priors)
        name = "prior" if priors else "rr"
        privatize_table(tmp_path / "t.parquet", tmp_path / f"one-{name}", noise=NoiseSource(insecure_seed=4), **options)
        sidecar = _privatize(dd.from_pandas(table, npartitions=5), tmp_path / f"dask-{name}", **options)
        pd.testing.assert_series_equal(_released(tmp_path / f"dask-{name}"), _released(tmp_path / f"one-{name}"))
        assert sidecar["k_range"] == (None if priors is None else [1, 4])
    samples = _released(tmp_path / "dask-rr").to_numpy().reshape(-1, 4)  # (draws, true label)
    assert frequencies_match(samples, randomized_response_probabilities(4, 1.0)).all()
    keys = sorted(ledger.key.split("-")[0] for ledger in ledgers(BudgetPolicy.from_environment().folder))
    assert keys == ["people", "table"]


def _privatize(frame, out, noise=None, **options):
    from labeldp.dask import privatize

    return privatize(frame, out, noise=noise or NoiseSource(insecure_seed=4), **options)


@dataclasses.dataclass(frozen=True)
class FreshRelease(BatchRelease):
    """What a generator of each task would release: each partition drawn under a new key."""

    def __call__(self, batch):
        return BatchRelease.__call__(dataclasses.replace(self, key=os.urandom(16)), batch)


@pytest.mark.parametrize("kernel", ["keyed", "fresh generator"])
def test_a_graph_computed_twice_or_split_otherwise_releases_the_same_labels(tmp_path, monkeypatch, kernel) -> None:
    if kernel != "keyed":
        monkeypatch.setattr(engines, "BatchRelease", FreshRelease)
    table = _table(600)
    for parts in (2, 7):
        _privatize(dd.from_pandas(table, npartitions=parts), tmp_path / str(parts), label_column="y",
                          id_column="id", classes=CLASSES, epsilon=1.0)  # fmt: skip
    assert _released(tmp_path / "2").equals(_released(tmp_path / "7")) == (kernel == "keyed")


def test_a_unit_keeps_at_most_m_rows_chosen_without_its_labels(tmp_path) -> None:
    table = _table(1000).assign(
        user=lambda t: t["user"].astype(str).where(t.index % 2 == 0, t["user"].astype(str) + ".0")
    )
    kept = []
    for labels, name in ((table["y"], "a"), ((table["y"] + 1) % 4, "b")):
        sidecar = _privatize(dd.from_pandas(table.assign(y=labels), npartitions=4), tmp_path / name,
                                    label_column="y", id_column="id", classes=CLASSES, epsilon=2.0,
                                    unit_column="user", max_rows_per_unit=3, seed=5)  # fmt: skip
        kept.append(_released(tmp_path / name).index)
    users = table.set_index("id").loc[kept[0], "user"].str.removesuffix(".0")
    assert kept[0].equals(kept[1]) and users.value_counts().max() == 3 and users.nunique() == 50
    assert sidecar["privacy_unit"]["row_epsilon"] == pytest.approx(2.0 / 3)


def test_bad_input_is_refused_before_anything_is_drawn(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(NoiseSource, "key", lambda *args: pytest.fail("drew"))
    folder = tmp_path / "table"
    folder.mkdir()
    table = _table(100)
    table.to_parquet(folder / "part-0.parquet")
    table.iloc[:50].to_parquet(folder / "part-0 copy.parquet")  # a stray copy of some of its rows
    options = dict(label_column="y", id_column="id", classes=CLASSES, epsilon=1.0)
    with pytest.raises(DataError, match="duplicated values"):
        _privatize(dd.read_parquet(str(folder)), tmp_path / "out", **options)
    with pytest.raises(DataError, match="outside"):
        _privatize(dd.from_pandas(table, npartitions=2), tmp_path / "out", **{**options, "classes": (0, 1, 2)})
    with pytest.raises(ConfigError, match="every row needs an id"):
        _privatize(dd.from_pandas(table, npartitions=2), tmp_path / "out", **{**options, "id_column": None})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["table"]
    assert not ledgers(BudgetPolicy.from_environment().folder)
    (tmp_path / "out").mkdir()
    with pytest.raises(ReleaseExistsError):
        _privatize(dd.from_pandas(table, npartitions=2), tmp_path / "out", **options)
    assert pq.read_table(folder / "part-0.parquet").num_rows == 100


def test_a_folder_deleted_and_released_again_is_a_second_release(tmp_path) -> None:
    """From a review of the engines' route: its release id stayed pending for the folder's path, so a release
    into the same path after the first was deleted took the first's id and was charged nothing."""
    import shutil

    frame = dd.from_pandas(_table(400), npartitions=2)
    options = dict(label_column="y", id_column="id", classes=CLASSES, epsilon=1.0)
    _privatize(frame, tmp_path / "out", **options)
    shutil.rmtree(tmp_path / "out")
    _privatize(frame, tmp_path / "out", **options)
    (people,) = [ledger for ledger in ledgers(BudgetPolicy.from_environment().folder) if ledger.key == "people-id"]
    assert [spend.epsilon for spend in people.spends()] == [1.0, 1.0] and people.worst().epsilon == 2.0
