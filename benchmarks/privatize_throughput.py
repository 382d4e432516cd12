"""Throughput and peak memory of `labeldp privatize` on a synthetic Parquet dataset, end to end.

Generates a Parquet file of ROWS rows (an int64 id, an int64 label in [0, 10), and a per-example prior
as 10 float32 columns: Dirichlet(0.3) rows, as a model's predictions are peaked; each label drawn from
its row's prior) in a temporary folder, then times ``privatize_table`` on it, once with randomized
response and once with RR-with-prior on the prior columns. Each run is a fresh subprocess pinned to
one CPU core (``os.sched_setaffinity``, ``OMP_NUM_THREADS=1``, Arrow's CPU and I/O pools at one
thread; glibc set to reuse freed memory, as the ``labeldp`` command does), so its time covers
everything (reading, the label check, the mechanism, writing, flushing to disk) on one core, and its
peak resident set size (``ru_maxrss``) is its own. The machine's load
average is printed with the results: the machine is shared, and a loaded core slows every figure.
The dataset and the releases are deleted at the end (``--keep`` keeps them).

Usage: PYTHONPATH=src python benchmarks/privatize_throughput.py [--rows 100000000] [--dir /tmp]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

NUM_CLASSES = 10
#: bytes a row takes on disk: the dataset (8 + 8 + 40, random floats do not compress) and two releases
BYTES_PER_ROW = 56 + 2 * 10
GENERATE_ROWS = 1 << 20  # rows generated (and written as one row group) at a time


def generate(path: Path, rows: int, seed: int = 0) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    fields = [pa.field("id", pa.int64()), pa.field("label", pa.int64())]
    fields += [pa.field(f"p{j}", pa.float32()) for j in range(NUM_CLASSES)]
    schema = pa.schema(fields)
    with pq.ParquetWriter(path, schema) as writer:
        for start in range(0, rows, GENERATE_ROWS):
            m = min(GENERATE_ROWS, rows - start)
            prior = rng.standard_gamma(0.3, size=(m, NUM_CLASSES))
            prior /= prior.sum(axis=1, keepdims=True)
            prior = prior.astype(np.float32)
            cumulative = np.cumsum(prior, axis=1, dtype=np.float64)
            label = (cumulative < rng.random(m)[:, None] * cumulative[:, -1:]).sum(axis=1)
            columns = [pa.array(np.arange(start, start + m, dtype=np.int64)), pa.array(label.astype(np.int64))]
            columns += [pa.array(prior[:, j]) for j in range(NUM_CLASSES)]
            writer.write_table(pa.Table.from_arrays(columns, schema=schema))


def child(arguments: dict) -> None:
    """One timed release, in this (fresh, pinned) process; prints its figures as JSON."""
    cpu = min(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpu})
    import pyarrow as pa

    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    from labeldp import runtime
    from labeldp.boundary import column as column_module
    from labeldp.boundary import privatize_table

    runtime.reuse_freed_memory()  # as the labeldp command does at start

    mechanism_seconds = [0.0]

    def timed(function):
        def wrapper(*args, **kwargs):
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                mechanism_seconds[0] += time.perf_counter() - start

        return wrapper

    column_module.randomized_response = timed(column_module.randomized_response)
    column_module.rr_with_prior = timed(column_module.rr_with_prior)
    prior_columns = [f"p{j}" for j in range(NUM_CLASSES)] if arguments["prior"] else None
    cpu_start, start = time.process_time(), time.perf_counter()
    sidecar = privatize_table(
        arguments["table"],
        arguments["out"],
        label_column="label",
        id_column="id",
        classes=range(NUM_CLASSES),
        epsilon=arguments["epsilon"],
        prior_columns=prior_columns,
        batch_rows=arguments["batch_rows"],
    )
    seconds = time.perf_counter() - start
    print(
        json.dumps(
            {
                "rows": sidecar["rows"],
                "seconds": seconds,
                "cpu_seconds": time.process_time() - cpu_start,
                "mechanism_seconds": mechanism_seconds[0],
                "cpu": cpu,
                "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                "ledger_epsilon": sidecar["ledger"]["epsilon"],
                "output_bytes": sum(f.stat().st_size for f in Path(arguments["out"]).iterdir()),
            }
        )
    )


def run(table: Path, out: Path, prior: bool, epsilon: float, batch_rows: int) -> dict:
    arguments = {"table": str(table), "out": str(out), "prior": prior, "epsilon": epsilon, "batch_rows": batch_rows}
    environment = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    load_before = os.getloadavg()
    result = subprocess.run(
        [sys.executable, __file__, "--child", json.dumps(arguments)], env=environment, capture_output=True, text=True
    )
    if result.returncode:
        sys.exit(f"the release failed:\n{result.stderr}")
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    return {**figures, "load_before": load_before, "load_after": os.getloadavg()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=10**8, help="rows of the synthetic dataset (default 10^8)")
    parser.add_argument(
        "--dir", default=tempfile.gettempdir(), help="where the temporary dataset goes (default %(default)s)"
    )
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--batch-rows", type=int, default=None, help="rows drawn at a time (default: the library's)")
    parser.add_argument("--keep", action="store_true", help="keep the dataset and the releases")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(json.loads(args.child))
        return
    from labeldp.tables.table_batches import DEFAULT_BATCH_ROWS

    batch_rows = args.batch_rows or DEFAULT_BATCH_ROWS
    rows = args.rows
    free = shutil.disk_usage(args.dir).free
    if rows * BYTES_PER_ROW > 0.8 * free:
        scaled = int(0.8 * free / BYTES_PER_ROW) // GENERATE_ROWS * GENERATE_ROWS
        print(
            f"{args.dir} has {free / 1e9:.1f} GB free, too little for {rows:,} rows "
            f"(~{rows * BYTES_PER_ROW / 1e9:.1f} GB): "
            f"scaled down to {scaled:,} rows"
        )
        rows = scaled
    folder = Path(tempfile.mkdtemp(prefix="labeldp-privatize-bench-", dir=args.dir))
    try:
        table = folder / "synthetic.parquet"
        start = time.perf_counter()
        generate(table, rows)
        print(
            f"generated {rows:,} rows ({table.stat().st_size / 1e9:.2f} GB of Parquet) "
            f"in {time.perf_counter() - start:.0f} s "
            f"in {folder}",
            flush=True,
        )
        results = []
        for name, prior in (("RR", False), ("RR-with-prior", True)):
            results.append((name, run(table, folder / f"release-{name}", prior, args.epsilon, batch_rows)))
            print(f"  measured {name}", flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
    print(
        f"\nprivatize_table end to end (read, check every label, draw, write, flush to disk) on one core "
        f"(pinned; OMP_NUM_THREADS=1; Arrow pools of 1 thread; freed memory reused, as by the labeldp command), "
        f"{os.cpu_count()} cores on the machine.\n"
        f"{rows:,} rows, K = {NUM_CLASSES}, epsilon = {args.epsilon:g}, blocks of {batch_rows:,} rows; input: id "
        f"int64, label int64, prior 10 x float32 (RR-with-prior reads them, RR does not).\n"
    )
    print(
        f"{'mechanism':<15}{'seconds':>9}{'labels/s':>13}{'labels/cpu-s':>14}{'mechanism s':>13}{'peak RSS':>11}"
        f"{'cpu/wall':>10}{'output':>9}   load average (1, 5, 15 min) before -> after"
    )
    for name, r in results:
        before = ", ".join(f"{x:.2f}" for x in r["load_before"])
        after = ", ".join(f"{x:.2f}" for x in r["load_after"])
        print(
            f"{name:<15}{r['seconds']:>9.1f}{r['rows'] / r['seconds']:>13,.0f}{r['rows'] / r['cpu_seconds']:>14,.0f}"
            f"{r['mechanism_seconds']:>13.1f}{r['peak_rss_bytes'] / 2**30:>8.2f} GiB"
            f"{r['cpu_seconds'] / r['seconds']:>10.2f}{r['output_bytes'] / 1e9:>6.2f} GB   {before} -> {after}"
        )
    print(
        "\nlabels/s: rows over wall-clock seconds; labels/cpu-s: over the process's CPU seconds (user + system), "
        "what an unshared core would give when cpu/wall is below 1 because other processes took turns on it.\n"
        "mechanism s: wall time inside randomized_response / rr_with_prior; the rest is reading, matching labels "
        "to the classes (both passes), converting, writing and flushing."
    )


if __name__ == "__main__":
    main()
