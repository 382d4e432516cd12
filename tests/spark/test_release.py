"""labeldp.spark.privatize on a local session: the one-process route's release under the same key, exactly
once whatever Spark recomputes, RR's and RR-with-prior's exact distributions, per-unit bounds across spellings
and partitions, every refusal before the first draw, one line on the people's ledgers."""

from __future__ import annotations

import dataclasses
import json
import os
import sys

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import labeldp.boundary.engines as engines
from labeldp import load_release, privatize_table
from labeldp.accounting.datasets import ledgers
from labeldp.accounting.policy import BudgetPolicy
from labeldp.boundary.batches import BatchRelease
from labeldp.errors import BudgetError, ConfigError, DataError
from labeldp.mechanisms import randomized_response_probabilities, rr_with_prior_probabilities
from labeldp.randomness import NoiseSource
from labeldp.spark import privatize

pytestmark = pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas")
CLASSES = (0, 1, 2)


def _table(rows: int = 600) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    prior = rng.dirichlet(np.ones(3), rows)
    return pd.DataFrame(
        {"id": np.arange(rows) * 7 + 3, "user": rng.integers(0, 40, rows), "y": rng.integers(0, 3, rows)}
        | {f"p{j}": prior[:, j] for j in range(3)}
    )


def _released(folder) -> pd.Series:
    release = load_release(folder)
    return pd.Series(release.labels, index=release.ids).sort_index()


def test_the_release_is_the_one_process_route_s_under_the_same_key(spark, tmp_path) -> None:
    """A table's labels released on Spark and in one process, from one (test-only) key: the same labels, bit
    for bit, with RR and with RR-with-prior; the same folder format; on the same ledgers."""
    table = _table()
    table.to_parquet(tmp_path / "t.parquet")
    for priors in (None, ["p0", "p1", "p2"]):
        options = dict(label_column="y", id_column="id", classes=CLASSES, epsilon=1.0, prior_columns=priors)
        name = "prior" if priors else "rr"
        privatize_table(tmp_path / "t.parquet", tmp_path / f"one-{name}", noise=NoiseSource(insecure_seed=4), **options)
        frame = spark.read.parquet(str(tmp_path / "t.parquet")).repartition(5)
        sidecar = privatize(frame, tmp_path / f"spark-{name}", noise=NoiseSource(insecure_seed=4), **options)
        pd.testing.assert_series_equal(_released(tmp_path / f"spark-{name}"), _released(tmp_path / f"one-{name}"))
        one = json.loads((tmp_path / f"one-{name}" / "release.json").read_text())
        assert {k: sidecar[k] for k in ("epsilon", "classes", "k_range", "mechanism", "columns")} == {
            k: one[k] for k in ("epsilon", "classes", "k_range", "mechanism", "columns")
        }
    assert sorted(ledger.key.split("-")[0] for ledger in ledgers(BudgetPolicy.from_environment().folder)) == [
        "people",
        "table",
    ]


@dataclasses.dataclass(frozen=True)
class FreshRelease(BatchRelease):
    """What a generator of each task would release: each batch drawn under a new key, drawn again if retried."""

    def __call__(self, batch):
        return BatchRelease.__call__(dataclasses.replace(self, key=os.urandom(16)), batch)


@pytest.mark.parametrize("kernel", ["keyed", "fresh generator"])
def test_a_frame_computed_twice_or_split_otherwise_releases_the_same_labels(spark, tmp_path, monkeypatch, kernel):
    """The release computed twice (as a retried task or a recomputed frame computes it), once split in 2 parts and
    once in 7: identical under the key; the same test tells a kernel that draws from a fresh generator."""
    from pyspark import cloudpickle

    if kernel != "keyed":
        monkeypatch.setattr(engines, "BatchRelease", FreshRelease)
        cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the executors run this module's kernel
    table, released = spark.createDataFrame(_table()), []
    try:
        for parts in (2, 7):
            privatize(table.repartition(parts), tmp_path / str(parts), label_column="y", id_column="id",
                      classes=CLASSES, epsilon=1.0, noise=NoiseSource(insecure_seed=9))  # fmt: skip
            released.append(_released(tmp_path / str(parts)))
    finally:
        if kernel != "keyed":
            cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
    assert released[0].equals(released[1]) == (kernel == "keyed")


def _counts(spark, folder, classes: int) -> np.ndarray:
    """Released-label counts by true label (the id modulo the classes), counted on Spark."""
    from pyspark.sql import functions as F

    released = spark.read.parquet(str(folder / "labels.parquet"))
    found = released.groupBy((F.col("id") % classes).alias("y"), "released_label")
    counts = np.zeros((classes, classes), dtype=np.int64)
    for row in found.count().collect():
        counts[int(row["y"]), int(row["released_label"])] = row["count"]
    return counts


@pytest.mark.parametrize("mechanism", ["rr", "rr-with-prior"])
def test_a_million_labels_a_class_follow_the_exact_distribution(spark, tmp_path, mechanism: str) -> None:
    """10^6 labels of each class released through Spark: a chi-square test against the exact probabilities of RR
    (K=3) or RR-with-prior (one prior, k=2), which rejects those of another epsilon."""
    from pyspark.sql import functions as F

    epsilon, classes, per_class = 1.0, 3, 1_000_000
    prior = np.array([0.5, 0.35, 0.15])
    frame = spark.range(classes * per_class, numPartitions=4).select(
        F.col("id"), (F.col("id") % classes).alias("y"), *(F.lit(p).alias(f"p{j}") for j, p in enumerate(prior))
    )
    priors = ["p0", "p1", "p2"] if mechanism == "rr-with-prior" else None
    privatize(frame, tmp_path / "out", label_column="y", id_column="id", classes=CLASSES, epsilon=epsilon,
              prior_columns=priors)  # fmt: skip
    counts = _counts(spark, tmp_path / "out", classes)

    def exact(eps: float) -> np.ndarray:
        if priors is None:
            return randomized_response_probabilities(classes, eps)
        return np.stack([rr_with_prior_probabilities(prior[None], eps)[0, y] for y in range(classes)])

    def p_values(eps: float) -> list[float]:
        expected = exact(eps) * per_class
        possible = expected > 0
        return [stats.chisquare(counts[y][possible[y]], expected[y][possible[y]]).pvalue for y in range(classes)]

    assert counts.sum() == classes * per_class
    assert min(p_values(epsilon)) > 1e-4
    assert min(p_values(epsilon + 0.05)) < 1e-6  # the test's power: another epsilon is told apart


def test_a_unit_keeps_at_most_m_rows_across_partitions_and_spellings(spark, tmp_path) -> None:
    """A user spelt 7, " 7" and 7.0 in a text column, its rows in 6 parts: at most M of them released, the same
    rows whatever the labels (chosen by the seed and the ids), each at epsilon / c."""
    rows = 600
    spellings = np.array(["7", " 7", "7.0", "8", "8.0", "9"], dtype=object)
    base = pd.DataFrame({"id": np.arange(rows), "user": spellings[np.arange(rows) % 6], "y": np.arange(rows) % 3})
    kept = []
    for labels, name in ((base["y"], "a"), ((base["y"] + 1) % 3, "b")):
        frame = spark.createDataFrame(base.assign(y=labels)).repartition(6)
        sidecar = privatize(frame, tmp_path / name, label_column="y", id_column="id", classes=CLASSES, epsilon=2.0,
                            unit_column="user", max_rows_per_unit=5, seed=3)  # fmt: skip
        kept.append(set(_released(tmp_path / name).index))
    assert kept[0] == kept[1] and len(kept[0]) == 15  # three people, five rows each
    unit = sidecar["privacy_unit"]
    assert (unit["units"], unit["rows_kept"], unit["most_rows"], unit["row_epsilon"]) == (3, 15, 5, 0.4)
    ledger = load_release(tmp_path / "a").ledger  # per person, as the one-process route records it
    assert (ledger.epsilon(), ledger.row_epsilon()) == pytest.approx((2.0, 0.4))


@pytest.mark.parametrize(
    "change, error, words",
    [
        (lambda t: t.assign(y=t["y"].where(t.index != 5, 7)), DataError, "outside"),
        (lambda t: pd.concat([t, t.iloc[[9]]]), DataError, "66"),
        (lambda t: t.assign(user=t["user"].astype(object).where(t.index != 3, None)), DataError, "missing"),
        (lambda t: t.assign(p0=t["p0"] + 1), DataError, "no distribution"),
    ],
    ids=["label outside", "duplicated id", "missing unit", "prior"],
)
def test_bad_input_is_refused_before_anything_is_drawn(spark, tmp_path, monkeypatch, change, error, words) -> None:
    monkeypatch.setattr(NoiseSource, "key", lambda *args: pytest.fail("drew"))
    frame = spark.createDataFrame(change(_table(60)))
    with pytest.raises(error, match=words):
        privatize(frame, tmp_path / "out", label_column="y", id_column="id", classes=CLASSES, epsilon=1.0,
                  unit_column="user", max_rows_per_unit=3, prior_columns=["p0", "p1", "p2"])  # fmt: skip
    assert not list(tmp_path.iterdir()) and not ledgers(BudgetPolicy.from_environment().folder)


def test_rows_need_ids(spark, tmp_path) -> None:
    with pytest.raises(ConfigError, match="every row needs an id"):
        privatize(spark.createDataFrame(_table(20)), tmp_path / "out", label_column="y", id_column=None,
                  classes=CLASSES, epsilon=1.0)  # fmt: skip


def test_one_line_a_release_and_the_cap_refused_before_the_draw(spark, tmp_path, monkeypatch) -> None:
    """Two releases of the users' labels, one on Spark and one in one process, on one people's ledger: the cap
    refuses a third before anything is drawn; `labeldp budget` lists the two."""
    from labeldp.cli import main

    table = _table(200)
    table.to_parquet(tmp_path / "t.parquet")
    policy = BudgetPolicy(BudgetPolicy.from_environment().folder, total_epsilon=2.5)
    options = dict(label_column="y", id_column="id", classes=CLASSES, epsilon=1.0, policy=policy,
                   unit_column="user", max_rows_per_unit=50)  # fmt: skip
    privatize(spark.read.parquet(str(tmp_path / "t.parquet")), tmp_path / "a", **options)
    privatize_table(tmp_path / "t.parquet", tmp_path / "b", **options)
    monkeypatch.setattr(NoiseSource, "key", lambda *args: pytest.fail("drew"))
    with pytest.raises(BudgetError, match="past --total-epsilon 2.5"):
        privatize(spark.read.parquet(str(tmp_path / "t.parquet")), tmp_path / "c", **options)
    (people,) = [ledger for ledger in ledgers(policy.folder) if ledger.key == "people-user"]
    assert [spend.epsilon for spend in people.spends()] == [1.0, 1.0] and people.worst().epsilon == 2.0
    assert main(["budget"]) == 0
