"""What the dataset ledgers cost a release of many people: time and disk.

1. ``privatize_table`` on a Parquet table of PEOPLE rows (a random int64 id a person, a label in {0, 1}), its
   ids named so that every person is charged, on an empty budget folder: the seconds spent on the ledgers
   (naming the groups, reserving, recording, the summary) against the rest of the release, medians of
   REPEATS fresh processes.
2. The check before a release of PEOPLE people against 30 earlier releases of a table grown by 1 % new
   people a day (the people of day 1 in all 30): ``charges`` and ``Spending.reserve``, medians of REPEATS.
3. The ledger folder's size after those 30 releases, per person and release.

The machine's load average is printed: the machine is shared, and a loaded core slows every figure.

Usage: PYTHONPATH=src python benchmarks/dataset_ledger.py [--people 10000000] [--repeats 3] [--dir /tmp]
       [--users 1000000 --release-only]: 1. per user, at most 20 rows each
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

DAYS = 30
GROWTH = 1.01
MAX_ROWS = 20


def pool(people: int) -> np.ndarray:
    """Distinct random int64 ids for the grown table's people (day 1's first)."""
    rng = np.random.default_rng(0)
    ids = np.unique(rng.integers(-(2**62), 2**62, size=int(people * GROWTH**DAYS * 1.01), dtype=np.int64))
    return rng.permutation(ids)[: int(people * GROWTH**DAYS) + 1]


def child(table: str, budget: str, users: str) -> None:
    """One timed privatize in this fresh process (per user where ``users`` is not 0); prints its figures as JSON."""
    from labeldp import runtime
    from labeldp.accounting import spending
    from labeldp.accounting.policy import BudgetPolicy
    from labeldp.boundary import privatize_table

    runtime.reuse_freed_memory()  # as the labeldp command does at start

    ledger = [0.0]

    def timed(function):
        def wrapper(*args, **kwargs):
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                ledger[0] += time.perf_counter() - start

        return wrapper

    for name in ("reserve", "record", "summary"):
        setattr(spending.Spending, name, timed(getattr(spending.Spending, name)))
    spending.charges = timed(spending.charges)
    import labeldp.boundary.release_folder as release_folder

    release_folder.charges = spending.charges
    out = Path(budget) / "release"
    start = time.perf_counter()
    people = dict(unit_column="user", max_rows_per_unit=MAX_ROWS) if int(users) else dict(id_column="id")
    privatize_table(table, out, label_column="y", classes=[0, 1], epsilon=1.0,
                    policy=BudgetPolicy(Path(budget) / "ledgers"), **people)  # fmt: skip
    total = time.perf_counter() - start
    print(json.dumps({"total": total, "ledger": ledger[0]}))


def privatize_cost(table: Path, folder: Path, repeats: int, users: int) -> dict:
    runs = []
    for repeat in range(repeats):
        budget = folder / f"budget{repeat}"
        budget.mkdir()
        command = [sys.executable, __file__, "--child", str(table), str(budget), str(users)]
        done = subprocess.run(command, capture_output=True, text=True, check=True, env={**os.environ})
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
        shutil.rmtree(budget)
    ratios = [run["ledger"] / (run["total"] - run["ledger"]) for run in runs]
    return {
        "seconds": statistics.median(run["total"] for run in runs),
        "ledger_seconds": statistics.median(run["ledger"] for run in runs),
        "ratio": statistics.median(ratios),
    }


def check_cost(people: int, folder: Path, repeats: int) -> dict:
    from labeldp.accounting.datasets import table_facts
    from labeldp.accounting.policy import BudgetPolicy, Guarantee
    from labeldp.accounting.spending import Source, Spending, charges

    ids = pool(people)
    policy = BudgetPolicy(folder / "ledgers")

    def source(day: int) -> Source:
        held = np.sort(ids[: int(people * GROWTH**day)])
        facts = table_facts("grown.parquet", "y", ["id", "y"], held.size)
        return Source(table=facts, columns=facts["columns"], keys=lambda column: held, id_column="id",
                      distinct=lambda column: held)  # fmt: skip

    for day in range(DAYS):
        spent = Spending(policy, charges(policy, source(day)), f"day{day}", "privatize")
        spent.reserve(Guarantee(1.0, 0.0), quiet=True)
        spent.record(Guarantee(1.0, 0.0))
    size = sum(path.stat().st_size for path in policy.folder.iterdir())
    everyone = int(people * GROWTH ** (DAYS - 1))
    seconds = []
    for repeat in range(repeats):
        start = time.perf_counter()
        check = Spending(policy, charges(policy, source(0)), f"next{repeat}", "privatize")
        check.reserve(Guarantee(1.0, 0.0), quiet=True)
        seconds.append(time.perf_counter() - start)
        check.cancel()
    worst = check.primary.worst()
    return {
        "check_seconds": statistics.median(seconds),
        "bytes": size,
        "bytes_per_person_release": size / (everyone * DAYS),
        "people": everyone,
        "worst": worst.epsilon,
        "at": worst.at,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--people", type=int, default=10_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dir", default=None)
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--release-only", action="store_true", help="measure 1. only")
    parser.add_argument(
        "--users", type=int, default=0, help=f"1. per user instead: this many, at most {MAX_ROWS} rows each"
    )
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = Path(tempfile.mkdtemp(dir=args.dir))
    try:
        ids = pool(args.people)[: args.people]
        rng = np.random.default_rng(1)
        columns = {"id": ids, "y": rng.integers(0, 2, args.people)}
        if args.users:
            columns["user"] = rng.integers(0, args.users, args.people)
        pq.write_table(pa.table(columns), folder / "table.parquet")
        load = os.getloadavg()
        release = privatize_cost(folder / "table.parquet", folder, args.repeats, args.users)
        check = None if args.release_only else check_cost(args.people, folder, args.repeats)
        load_after = os.getloadavg()
    finally:
        shutil.rmtree(folder)
    print(f"load average {load[0]:.2f} before, {load_after[0]:.2f} after ({os.cpu_count()} cores)")
    who = f"{args.people:,} rows of {args.users:,} users" if args.users else f"{args.people:,} people (ids named)"
    print(
        f"1. privatize_table of {who}: {release['seconds']:.2f} s, of which the "
        f"ledgers {release['ledger_seconds']:.2f} s: +{100 * release['ratio']:.1f} % (target at most 10 %)"
    )
    if check is None:
        return
    print(
        f"2. the check before a release of {args.people:,} people against {DAYS} releases of a table grown "
        f"{100 * (GROWTH - 1):g} % a day: {check['check_seconds']:.2f} s (target at most 10 s); the worst person "
        f"at epsilon {check['worst']:g} ({check['at']:,} people)"
    )
    print(
        f"3. the ledger folder after {DAYS} releases of up to {check['people']:,} people: {check['bytes']:,} bytes, "
        f"{check['bytes_per_person_release']:.3f} bytes a person a release (target at most 8)"
    )


if __name__ == "__main__":
    main()
