"""A label column released on Spark (:func:`privatize`): the steps of :mod:`labeldp.boundary.engines`, run on
a DataFrame by Arrow batches (``mapInArrow``), every pass an aggregate or a write."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from labeldp.accounting.people import People
from labeldp.boundary.batches import CHECKS, BatchChecks, BatchRelease
from labeldp.boundary.engines import Engine, Units, release_on
from labeldp.tables.frames import I0, I1, RANK, U0, U1, identity_frame

#: the session's settings labeldp chooses: no UI or progress bars on the console, shuffles in few parts
_QUIET = {"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false", "spark.sql.shuffle.partitions": "8"}


def session(master: str = "local[2]", app: str = "labeldp", **config: str):
    """A Spark session on ``master`` (``local[N]``, ``spark://HOST:PORT``) whose Python workers run this
    interpreter, its UI off; ``config``: more of Spark's settings, by name."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.master(master).appName(app)
    for name, value in {**_QUIET, **config}.items():
        builder = builder.config(name, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def privatize(frame, out, *, label_column: str, id_column: str, classes, epsilon: float, **options) -> dict[str, Any]:
    """Release the label column of the Spark DataFrame ``frame`` once into the new folder ``out``, a path every
    executor writes to (:func:`~labeldp.boundary.engines.release_on`, whose options it takes: the privacy unit,
    the prior columns, the dataset's name, the budget policy, the noise).

    Each label is epsilon-label-DP (a unit's labels together, with a privacy unit), exactly once whatever
    Spark recomputes: a retried or speculative task, a lost executor.
    """
    return release_on(SparkTable(frame), out, label_column=label_column, id_column=id_column, classes=classes,
                      epsilon=epsilon, **options)  # fmt: skip


def _identity(frame, column: str, first: str, second: str):
    """``frame`` with the identity of each row's ``column`` as two long columns: an integer column's own values
    and 0 (no Python), any other column's through Python, that column alone (:func:`identity_frame`)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import ByteType, IntegerType, LongType, ShortType

    if isinstance(frame.schema[column].dataType, (ByteType, ShortType, IntegerType, LongType)):
        return frame.withColumn(first, F.col(column).cast("long")).withColumn(second, F.lit(0).cast("long"))
    words = F.pandas_udf(identity_frame, "i0 long, i1 long")(F.col(column))  # type: ignore[call-overload]
    return (
        frame.withColumn(first, words).withColumn(second, F.col(f"{first}.i1")).withColumn(first, F.col(f"{first}.i0"))
    )


def _arrays(frame, *columns: str) -> list[np.ndarray]:
    """Columns of a small aggregate, collected through Arrow (a number a row: no label)."""
    table = frame.select(*columns).toArrow()
    return [table.column(name).to_numpy() for name in columns]


class SparkTable(Engine):
    """A Spark DataFrame as a release uses it."""

    name = "Spark"

    def checked(self, checks: BatchChecks) -> dict[str, Any]:
        from pyspark.sql import functions as F

        def check(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            found: dict[str, Any] = {name: 0 if name == "rows" else False for name in CHECKS}
            for batch in batches:
                for name, value in checks(batch).items():
                    found[name] = found[name] + value if name == "rows" else found[name] or value
            yield pa.RecordBatch.from_pylist([found])

        columns = [checks.label, *checks.keys, *checks.priors]
        schema = "rows long, outside boolean, missing boolean, bad boolean"
        flags = self.frame.select(*columns).mapInArrow(check, schema)
        row = flags.agg(F.sum("rows"), *(F.max(name) for name in CHECKS[1:])).collect()[0]
        return {name: row[position] or 0 for position, name in enumerate(CHECKS)}

    def id_keys(self, column: str) -> np.ndarray:
        return _arrays(_identity(self.frame.select(column), column, I0, I1), I0)[0]

    def id_held_twice(self, column: str, among: np.ndarray | None) -> Any:
        from pyspark.sql import functions as F

        keyed = _identity(self.frame.select(column), column, I0, I1)
        if among is not None:
            keyed = keyed.where(F.col(I0).isin([int(key) for key in among]))
        counted = keyed.groupBy(I0, I1).agg(F.count("*").alias("n"), F.first(column).alias("id"))
        found = counted.where("n > 1").limit(1).collect()
        return found[0]["id"] if found else None

    def bound(self, ids: str, unit: str, limit: int, seed: int) -> Units:
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        order = (F.xxhash64(F.lit(seed), F.col(I0), F.col(I1)), F.col(I0), F.col(I1))
        rank = F.row_number().over(Window.partitionBy(U0, U1).orderBy(*order)) - 1
        units = _identity(_identity(self.frame, ids, I0, I1), unit, U0, U1)
        self.kept = units.withColumn(RANK, rank).where(F.col(RANK) < limit)
        return Units.of(*_arrays(self.kept.groupBy(U0, U1).count(), U0, "count"))

    def people(self, column: str, every: bool) -> People:
        keyed = _identity((self.frame if every else self.kept).select(column), column, "key", "second")
        keys, rows = _arrays(keyed.groupBy("key").count(), "key", "count")
        units = Units.of(keys, rows)
        return People.of_counts(column, units.keys, units.rows)

    def unit_of_ids(self) -> tuple[np.ndarray, np.ndarray]:
        keys, units = _arrays(self.kept.select(I0, U0).orderBy(I0), I0, U0)
        return keys, units

    def label_is_text(self, column: str) -> bool:
        from pyspark.sql.types import StringType

        return isinstance(self.frame.schema[column].dataType, StringType)

    def write(self, path: Path, release: BatchRelease, needed: list[str]) -> None:
        from pyspark.sql.pandas.types import from_arrow_type
        from pyspark.sql.types import IntegerType, StructField, StructType

        def draw(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            for batch in batches:
                yield release(batch)

        released, k = release.written
        fields = [self.frame.schema[release.ids], StructField(released, from_arrow_type(release.class_values.type))]
        schema = StructType(fields + ([StructField(k, IntegerType(), False)] if release.priors else []))
        self.kept.select(*needed).mapInArrow(draw, schema).write.parquet(str(path))

    def k_range(self, path: Path, column: str) -> tuple[int, int, int | None]:
        from pyspark.sql import functions as F

        k = F.col(column)
        found = self.frame.sparkSession.read.parquet(str(path)).agg(F.min(k), F.max(k), F.min(F.when(k >= 2, k)))
        low, high, informative = found.collect()[0]
        return int(low), int(high), None if informative is None else int(informative)


__all__ = ["SparkTable", "privatize", "session"]
