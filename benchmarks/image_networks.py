"""Which network for 28x28 images: non-private MNIST accuracy per second of training, one thread each.

Each candidate trains non-privately on MNIST (``labeldp train --method non-private --model NAME``,
the MNIST recipe's optimiser, schedule and +-2 px shifts, the candidate's epochs and learning rate)
with one torch thread (``--threads 1``), so that two measurements can share a 2-core machine. The
table gives, per candidate, the test accuracy, the wall-clock seconds of the whole command and its CPU
seconds (the median of ``--repeats`` runs with seeds 0, 1, ...), the accuracy per CPU second (test
accuracy in % over CPU seconds: on a shared machine the CPU seconds of one thread move far less with
the neighbours' load than the wall-clock ones) and the load average (1 minute) before each run.

``--lp2st`` then runs LP-2ST at ``--epsilons`` (1 and 2) with each of ``--networks`` (the small CNN
and the ConvNet), with the MNIST LP-2ST recipe and RR's first release (as its figures were measured),
paired: the same ``--insecure-noise-seed`` for every network, so that they train on the same released
labels of stage 1. The seed makes these
runs NOT PRIVATE: it is for this comparison only.

The machine's other load moves every figure: read the seconds with the load averages beside them.

Usage: python benchmarks/image_networks.py [--data-dir ../shared/datasets/mnist] [--repeats 1]
       [--candidates cnn:12 convnet:6 convnet:12] [--lp2st] [--networks cnn convnet] [--skip-non-private]
       [--out runs/image-networks]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"

#: candidate network -> its default epochs and its learning rate (12 epochs at 0.05, the MNIST recipe's,
#: for a network not listed)
CANDIDATES = {"cnn": (12, 0.05), "cnn-bn": (8, 0.1), "convnet": (6, 0.1)}


def labeldp(arguments: list[str], out: Path) -> dict:
    """Run ``labeldp train ARGUMENTS --out OUT`` with one thread in a fresh folder; its summary, with the
    wall-clock seconds of the whole command and the load average (1 minute) before it."""
    shutil.rmtree(out, ignore_errors=True)
    env = dict(os.environ, PYTHONPATH=str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    load = os.getloadavg()[0]
    cpu, start = _children_cpu(), time.perf_counter()
    command = [sys.executable, "-m", "labeldp", "train", *arguments, "--threads", "1", "--quiet", "--out", str(out)]
    subprocess.run(command, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seconds, cpu = time.perf_counter() - start, _children_cpu() - cpu
    summary = json.loads((out / "summary.json").read_text())
    return {"accuracy": 100 * summary["test_accuracy"], "seconds": seconds, "cpu": cpu, "load": load}


def _children_cpu() -> float:
    """CPU seconds (user and system) of the finished child processes so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def median_of(runs: list[dict]) -> dict:
    """The medians of a candidate's repeated runs (accuracy, seconds, load), and the accuracy per second."""
    row = {key: statistics.median(run[key] for run in runs) for key in ("accuracy", "seconds", "cpu", "load")}
    row["per_second"] = row["accuracy"] / row["cpu"]
    return row


def non_private(args: argparse.Namespace, data: list[str]) -> None:
    """The table of candidates: accuracy, seconds, CPU seconds, accuracy per CPU second, load."""
    header = ("network", "epochs", "lr", "accuracy %", "seconds", "cpu s", "acc/cpu s", "load")
    print("{:<8} {:>6} {:>5} {:>10} {:>8} {:>6} {:>9} {:>5}".format(*header))
    for spec in args.candidates:
        name, _, epochs = spec.partition(":")
        default_epochs, lr = CANDIDATES.get(name, (12, 0.05))
        epochs = int(epochs or default_epochs)
        runs = [
            labeldp(
                [*data, "--method", "non-private", "--model", name, "--epochs", str(epochs), "--lr", str(lr)]
                + ["--seed", str(seed)],
                args.out / f"non-private-{name}-{epochs}-s{seed}",
            )
            for seed in range(args.repeats)
        ]
        row = median_of(runs)
        print(
            f"{name:<8} {epochs:>6} {lr:>5g} {row['accuracy']:>10.2f} {row['seconds']:>8.0f} {row['cpu']:>6.0f} "
            f"{row['per_second']:>9.3f} {row['load']:>5.2f}",
            flush=True,
        )


def lp2st(args: argparse.Namespace, data: list[str]) -> None:
    """LP-2ST at each epsilon with each network, on the same noise."""
    print(f"\nLP-2ST (MNIST recipe, noise seed {args.noise_seed} for both networks: NOT PRIVATE, a comparison)")
    print(f"{'network':<8} {'epsilon':>7} {'accuracy %':>10} {'seconds':>8} {'cpu s':>6} {'load':>5}")
    for epsilon in args.epsilons:
        for name in args.networks:
            run = labeldp(
                [*data, "--method", "lp-2st", "--epsilon", str(epsilon), "--model", name, "--first-release", "rr"]
                + ["--insecure-noise-seed", str(args.noise_seed)],
                args.out / f"lp-2st-{name}-e{epsilon:g}",
            )
            print(
                f"{name:<8} {epsilon:>7g} {run['accuracy']:>10.2f} {run['seconds']:>8.0f} {run['cpu']:>6.0f} "
                f"{run['load']:>5.2f}",
                flush=True,
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "datasets" / "mnist"))
    parser.add_argument(
        "--candidates", nargs="+", default=["cnn:12", "convnet:6", "convnet:12"], metavar="NAME[:EPOCHS]"
    )
    parser.add_argument("--repeats", type=int, default=1, help="runs per candidate (seeds 0, 1, ...)")
    parser.add_argument("--lp2st", action="store_true", help="also LP-2ST at --epsilons with --networks")
    parser.add_argument("--networks", nargs="+", default=["cnn", "convnet"], help="LP-2ST's networks")
    parser.add_argument("--epsilons", type=float, nargs="+", default=[1.0, 2.0])
    parser.add_argument("--noise-seed", type=int, default=1)
    parser.add_argument("--skip-non-private", action="store_true")
    parser.add_argument("--out", type=Path, default=Path("runs/image-networks"))
    args = parser.parse_args()
    data = ["--dataset", "mnist", "--data-dir", args.data_dir, "--device", "cpu"]
    if not args.skip_non_private:
        non_private(args, data)
    if args.lp2st:
        lp2st(args, data)


if __name__ == "__main__":
    main()
