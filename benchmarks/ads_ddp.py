"""The ads route's training speed in one process and under torchrun: rows/s per epoch of
`labeldp hashed train` on a generated table (benchmarks/ads_scale.py's, its hashing), with the load
average beside each figure (the machine is shared: compare figures taken at similar loads).

Each process count runs the whole command (release, then training) in a fresh run folder; the figure
is the training's rows per second in each epoch (every rank's rows over the epoch's seconds), from
summary.json, and the model's AUC on the test table. One process runs without torchrun.

usage:
    PYTHONPATH=src python benchmarks/ads_scale.py --speed 1000000     # writes /tmp/labeldp-ads/train-1000000.parquet
    PYTHONPATH=src python benchmarks/ads_ddp.py --rows 1000000 --processes 1 2 --route rr
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from ads_scale import BLOCK_ROWS, CROSSES, SLOTS, load, table
from sklearn.metrics import roc_auc_score

from labeldp.ads import predict_hashed
from labeldp.data.hashed_table import read_column


def command(train: Path, out: Path, route: str, epochs: int, processes: int) -> list[str]:
    """`labeldp hashed train` on ``train`` with the benchmark's hashing, under torchrun for several processes."""
    launcher = [sys.executable, "-m", "labeldp"]
    if processes > 1:
        launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node"]
        launcher += [str(processes), "-m", "labeldp"]
    bits = [f"{column}={b}" for column, b in SLOTS] + [f"{':'.join(c)}={b}" for c, b in CROSSES]
    return launcher + [
        *("hashed", "train", "--table", str(train), "--label-column", "converted", "--classes", "0", "1"),
        *("--columns", *(column for column, _ in SLOTS)),
        *(arg for cross, _ in CROSSES for arg in ("--cross", ":".join(cross))),
        *("--slot-bits", *bits, "--route", route, "--epsilon", "2", "--epochs", str(epochs)),
        *("--block-rows", str(BLOCK_ROWS), "--out", str(out)),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--route", default="rr", choices=["rr", "counts"])
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--test-rows", type=int, default=200_000)
    parser.add_argument("--dir", default="/tmp/labeldp-ads")
    args = parser.parse_args()
    folder = Path(args.dir)
    train, test = table(folder, args.rows, "train"), table(folder, args.test_rows, "test")
    y_test = read_column(test, "converted")  # public test labels (synthetic)
    environment = {**os.environ, "OMP_NUM_THREADS": "1"}
    print(f"{args.rows:,} rows, route {args.route}, {os.cpu_count()} cores; load average {load()} (1, 5, 15 min)")
    print(f"{'processes':>9}{'release s':>11}{'epoch':>7}{'rows/s':>12}{'load':>7}")
    for processes in args.processes:
        out = folder / f"ddp-{args.route}-{processes}"
        shutil.rmtree(out, ignore_errors=True)
        started = time.perf_counter()
        subprocess.run(command(train, out, args.route, args.epochs, processes), check=True, env=environment)
        summary = json.loads((out / "summary.json").read_text())
        for record in summary["history"]:
            print(
                f"{processes:>9}{summary['seconds']['release']:>11.2f}{record['epoch']:>7}"
                f"{record['rows_per_second']:>12,.0f}{os.getloadavg()[0]:>7.2f}",
                flush=True,
            )
        seconds = time.perf_counter() - started
        auc = roc_auc_score(y_test, predict_hashed(out, test))
        print(f"{'':>9} total {seconds:.1f} s (with the start of the processes); test AUC {auc:.4f}")
        shutil.rmtree(out)
    print(f"load average at the end {load()}")


if __name__ == "__main__":
    main()
