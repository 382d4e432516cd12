"""Epoch time of a label-DP run with 1 process and with N under torchrun (one thread each).

Runs the same `labeldp train` (lp-1st, fresh run folders) once alone and once with
``torchrun --nproc_per_node N``, reads each run's per-epoch seconds from metrics.jsonl, and prints
the ratio of the median epoch times (N processes / 1; below 1 is a speed-up). Ratios, not absolute
times: the machine's other load moves both.

Usage: python benchmarks/torchrun_speed.py [--dataset mnist --data-dir ../shared/datasets/mnist]
       [--processes 2] [--epochs 1] [--out runs/torchrun-speed]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path


def epoch_seconds(folder: Path) -> float:
    rows = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return statistics.median(row["seconds"] for row in rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="digits")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--out", default="runs/torchrun-speed")
    args = parser.parse_args()
    out = Path(args.out)
    shutil.rmtree(out, ignore_errors=True)
    train = [
        "-m",
        "labeldp",
        "train",
        "--dataset",
        args.dataset,
        "--method",
        "lp-1st",
        "--epsilon",
        "4",
        "--epochs",
        str(args.epochs),
        "--threads",
        "1",
        "--quiet",
        "--device",
        "cpu",
    ]
    train += ["--data-dir", args.data_dir] if args.data_dir else []
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    subprocess.run([sys.executable, *train, "--out", str(out / "1")], check=True, env=env)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node",
            str(args.processes),
            *train,
            "--out",
            str(out / str(args.processes)),
        ],
        check=True,
        env=env,
    )
    alone, shared = epoch_seconds(out / "1"), epoch_seconds(out / str(args.processes))
    print(f"{args.dataset} lp-1st, median epoch time with {args.processes} processes / with 1: {shared / alone:.2f}")


if __name__ == "__main__":
    main()
