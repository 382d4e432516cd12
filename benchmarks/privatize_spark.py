"""A label column released on Spark (``local[2]``) against the one-process route, on the throughput
benchmark's synthetic table (benchmarks/privatize_throughput.py: an int64 id, an int64 label in [0, 10)
and 10 prior columns), by randomized response at epsilon 1, each row its own person; and the keyed
kernel's speed against the generator-driven kernels it replaced.

Each release runs in a fresh subprocess: labels/s end to end (the session's start apart), the Python
driver's peak resident set (``VmHWM``) and, on Spark, the JVM's (``VmHWM``: in local mode it is the
driver and the executors together). The kernels are timed in this process, medians of ``--repeats``.
The machine's load average is printed with the results: the machine is shared.

Usage: PYTHONPATH=src python benchmarks/privatize_spark.py [--rows 100000000] [--small-rows 10000000]
       [--dir /tmp] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from privatize_throughput import generate  # noqa: E402 - the throughput benchmark's table


def child(arguments: dict) -> None:
    """One timed release, in this fresh process; prints its figures as JSON."""
    from labeldp import privatize_table
    from labeldp.accounting.policy import BudgetPolicy

    options = dict(label_column="label", id_column="id", classes=range(10), epsilon=1.0,
                   policy=BudgetPolicy(arguments["budget"]))  # fmt: skip
    figures: dict = {}
    if arguments["engine"] == "local":
        started = time.perf_counter()
        sidecar = privatize_table(arguments["table"], arguments["out"], **options)
    else:
        from labeldp import spark

        started = time.perf_counter()
        session = spark.session("local[2]", **{"spark.driver.memory": "8g"})
        figures["session_s"] = time.perf_counter() - started
        started = time.perf_counter()
        sidecar = spark.privatize(session.read.parquet(arguments["table"]), arguments["out"], **options)
        jvm = session.sparkContext._gateway.jvm.java.lang.ProcessHandle.current().pid()
        status = Path(f"/proc/{jvm}/status").read_text()
        figures["jvm_peak_mib"] = (
            int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM"))) / 1024
        )
    seconds = time.perf_counter() - started
    figures |= {"rows": sidecar["rows"], "seconds": seconds, "labels_per_s": sidecar["rows"] / seconds,
                "driver_peak_mib": _peak_mib("self")}  # fmt: skip
    print(json.dumps(figures))


def _peak_mib(process) -> float:
    """A process's peak resident set (``VmHWM``: its own since its exec, unlike ``ru_maxrss``)."""
    status = Path(f"/proc/{process}/status").read_text().splitlines()
    return int(next(line.split()[1] for line in status if line.startswith("VmHWM"))) / 1024


def release(engine: str, table: Path, work: Path) -> dict:
    shutil.rmtree(work / "out", ignore_errors=True)
    shutil.rmtree(work / "budget", ignore_errors=True)
    arguments = {"engine": engine, "table": str(table), "out": str(work / "out"), "budget": str(work / "budget")}
    found = subprocess.run([sys.executable, __file__, "--child", json.dumps(arguments)], capture_output=True,
                           text=True, check=True)  # fmt: skip
    return json.loads(found.stdout.strip().splitlines()[-1])


def kernels(rows: int, repeats: int) -> list[tuple[str, float, float]]:
    """(what, labels/s of the generator-driven kernel, of the keyed one), medians of ``repeats``."""
    from labeldp.mechanisms import randomized_response, rr_with_prior
    from labeldp.mechanisms.keyed import keyed_randomized_response, keyed_rr_with_prior, row_words

    rng = np.random.default_rng(0)
    key, identity = os.urandom(16), np.zeros((rows, 2), dtype=np.uint64)
    identity[:, 0] = np.arange(rows)
    prior = rng.standard_gamma(0.3, size=(rows, 10))
    prior /= prior.sum(axis=1, keepdims=True)
    found = []
    for name, old, new in (
        ("RR, K=2", lambda y: randomized_response(y % 2, 2, 1.0, rng),
         lambda y: keyed_randomized_response(y % 2, 2, 1.0, row_words(key, identity))),
        ("RR, K=10", lambda y: randomized_response(y, 10, 1.0, rng),
         lambda y: keyed_randomized_response(y, 10, 1.0, row_words(key, identity))),
        ("RR-with-prior, K=10", lambda y: rr_with_prior(y, prior, 1.0, rng),
         lambda y: keyed_rr_with_prior(y, prior, 1.0, row_words(key, identity))),
    ):  # fmt: skip
        labels = rng.integers(0, 10, rows)
        speeds = []
        for draw in (old, new):
            times = []
            for _ in range(repeats):
                started = time.perf_counter()
                draw(labels)
                times.append(time.perf_counter() - started)
            speeds.append(rows / statistics.median(times))
        found.append((name, *speeds))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=100_000_000)
    parser.add_argument("--small-rows", type=int, default=10_000_000, help="the second size, for the memory")
    parser.add_argument("--kernel-rows", type=int, default=10_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dir", default=tempfile.gettempdir())
    parser.add_argument("--child")
    args = parser.parse_args()
    if args.child:
        return child(json.loads(args.child))
    print(f"load average at the start: {os.getloadavg()[0]:.2f} (2 cores)")
    for name, old, new in kernels(args.kernel_rows, args.repeats):
        print(
            f"kernel {name:<20} generator {old / 1e6:6.1f} M labels/s   keyed {new / 1e6:6.1f} M/s   {new / old:.2f}x"
        )
    work = Path(tempfile.mkdtemp(dir=args.dir, prefix="labeldp-spark-"))
    try:
        for rows in sorted({args.small_rows, args.rows}):
            table = work / f"table-{rows}.parquet"
            generate(table, rows)
            local, spark = release("local", table, work), release("spark", table, work)
            print(
                f"{rows:>12,} rows: one process {local['labels_per_s'] / 1e6:5.2f} M labels/s (driver peak "
                f"{local['driver_peak_mib']:,.0f} MiB); Spark local[2] {spark['labels_per_s'] / 1e6:5.2f} M labels/s "
                f"({spark['labels_per_s'] / local['labels_per_s']:.2f}x; session start {spark['session_s']:.1f} s; "
                f"Python driver peak {spark['driver_peak_mib']:,.0f} MiB, JVM peak {spark['jvm_peak_mib']:,.0f} MiB)"
            )
            table.unlink()
        print(f"load average at the end: {os.getloadavg()[0]:.2f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
