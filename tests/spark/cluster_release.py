"""Run by tests/spark/test_cluster.py (not a test module itself): a release on the standalone cluster at
MASTER, speculation on, each batch's draw slowed so that a worker can be killed while it draws; each task
attempt leaves a marker in MARKERS (``<partition>-<attempt>-<process id>``) as it draws a batch. KERNEL: ``keyed``,
or ``fresh`` (each batch drawn under a new key, as a generator of each task attempt would draw it).

usage: cluster_release.py MASTER TABLE OUT MARKERS KERNEL
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from pathlib import Path

import labeldp.boundary.engines as engines
from labeldp import spark
from labeldp.boundary.batches import BatchRelease
from labeldp.randomness import NoiseSource

master, table, out, markers, kernel = sys.argv[1:6]


@dataclasses.dataclass(frozen=True)
class SlowedRelease(BatchRelease):
    """The release of a batch, marked and slowed (pickled by value: this module is ``__main__``)."""

    def __call__(self, batch):
        from pyspark import TaskContext

        task = TaskContext.get()
        Path(markers, f"{task.partitionId()}-{task.attemptNumber()}-{os.getpid()}").touch()
        time.sleep(0.6)  # the test finds the worker drawing and kills it meanwhile
        fresh = dataclasses.replace(self, key=os.urandom(16)) if kernel == "fresh" else self
        return BatchRelease.__call__(fresh, batch)


engines.BatchRelease = SlowedRelease
session = spark.session(master, **{"spark.speculation": "true", "spark.task.maxFailures": "8"})
sidecar = spark.privatize(
    session.read.parquet(table), out, label_column="y", id_column="id", classes=(0, 1, 2), epsilon=1.0,
    noise=NoiseSource(insecure_seed=9),
)  # fmt: skip
print(json.dumps({"rows": sidecar["rows"]}))
