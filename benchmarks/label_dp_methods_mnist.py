"""The label-DP methods side by side on MNIST: RR (LP-1ST), LP-2ST, LP-2ST with a cluster prior and
ALIBI at small and moderate epsilons, with test accuracy and wall time per run.

All runs use the MNIST recipe of the built-in profiles (small CNN, 12 epochs per stage) and differ
only in the method; they run through the sweep runner, so finished runs in --out are read back.

Usage: python benchmarks/label_dp_methods_mnist.py [--data-dir ../shared/datasets/mnist] [--epsilons 0.1 0.5 1 2]
"""

from __future__ import annotations

import argparse
import dataclasses
import platform

import torch

from labeldp.experiments.recipes import MNIST_TRAIN
from labeldp.experiments.sweep import SweepJob, run_sweep
from labeldp.training import RunConfig

#: method name in the table -> RunConfig fields
METHODS = {
    "rr": {"method": "lp-1st"},
    "lp-2st": {"method": "lp-2st"},
    "lp-2st+cluster": {"method": "lp-2st", "prior": "cluster"},
    "alibi": {"method": "alibi"},
}
#: published MNIST accuracies (%) of ALIBI (Malek et al. 2021, Table 2)
PUBLISHED = {("alibi", 1.0): 94.1, ("alibi", 2.0): 96.6}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default="../shared/datasets/mnist")
    parser.add_argument("--epsilons", type=float, nargs="+", default=[0.1, 0.5, 1.0, 2.0])
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--out", default="runs/label-dp-methods-mnist")
    args = parser.parse_args()

    jobs = []
    for name in args.methods:
        for epsilon in args.epsilons:
            config = RunConfig(dataset="mnist", epsilon=epsilon, seed=args.seed, data_dir=args.data_dir,
                               train=dataclasses.replace(MNIST_TRAIN), **METHODS[name])
            jobs.append(SweepJob(f"mnist/e{epsilon:g}/{name}/run{args.seed}", config))
    rows = run_sweep(jobs, args.out, workers=args.workers, data_dir=args.data_dir)
    print(f"\nMNIST test accuracy by label-DP method; epsilon from each run's ledger; seconds = wall time on "
          f"{torch.get_num_threads()} CPU threads ({platform.machine()}), {args.workers} run(s) at a time:\n")
    print(f"{'method':<16}{'epsilon':>8}{'accuracy %':>12}{'published %':>13}{'seconds':>9}")
    for job, row in zip(jobs, rows):
        name = job.key.split("/")[2]
        if row["status"] != "done":
            print(f"{name:<16}{row['target_epsilon']:>8}  failed: {row['error']}")
            continue
        published = PUBLISHED.get((name, float(row["target_epsilon"])))
        print(f"{name:<16}{float(row['epsilon']):>8.3g}{100 * float(row['test_accuracy']):>12.2f}"
              f"{published if published is not None else '-':>13}{float(row['seconds']):>9.0f}")


if __name__ == "__main__":
    main()
