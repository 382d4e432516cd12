"""The label-DP methods side by side on MNIST: RR (LP-1ST), LP-2ST, LP-2ST with a cluster prior,
ALIBI and PATE at small and moderate epsilons, with test accuracy and wall time per run.

All runs use the MNIST recipe of the built-in profiles (small CNN, 12 epochs per stage) and differ
only in the method; they run through the sweep runner, so finished runs in --out are read back.
The cluster prior is 100 k-means clusters of PCA features, a tenth of epsilon on their noisy
histograms, tempered with temperature 4 (the untempered prior puts 93 % of stage-1 examples at k = 1,
whose errors are systematic). PATE (250 teachers of 240 examples, 20 epochs each; GNMax with vote noise
62.5 and as many queries
as the budget pays for, delta 1e-5) trains its student for 100 epochs at batch 32, because it
sees only its few answered queries. For PATE the table also gives the share of correct answers
(read from the run's release and the true labels: a diagnostic, not something a private run shows).

The same recipes are the profiles mnist/e{0.1,0.5,1,2}/{lp-2st-cluster,pate}/run{0,1,2}.

Usage: python benchmarks/label_dp_methods_mnist.py [--data-dir ../shared/datasets/mnist] [--epsilons 0.1 0.5 1 2]
"""

from __future__ import annotations

import argparse
import dataclasses
import platform

import numpy as np
import torch

from labeldp.boundary import unseal
from labeldp.data import load_dataset
from labeldp.experiments.sweep_runner import SweepJob, run_sweep
from labeldp.recipes.builtin_profiles import (
    CLUSTER_PRIOR,
    METHODS_EPSILONS,
    MNIST_PROFILE_MODEL,
    MNIST_TRAIN,
    PATE_STUDENT_TRAIN,
)
from labeldp.runs import RunConfig

#: method name in the table -> RunConfig fields
METHODS = {
    "rr": {"method": "lp-1st"},
    "lp-2st": {"method": "lp-2st"},
    "lp-2st+cluster": {"method": "lp-2st", **CLUSTER_PRIOR},
    "alibi": {"method": "alibi"},
    "pate": {"method": "pate", "train": PATE_STUDENT_TRAIN},
}
#: published MNIST accuracies (%) of ALIBI (Malek et al. 2021, Table 2)
PUBLISHED = {("alibi", 1.0): 94.1, ("alibi", 2.0): 96.6}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default="../shared/datasets/mnist")
    parser.add_argument("--epsilons", type=float, nargs="+", default=[float(e) for e in METHODS_EPSILONS])
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--out", default="runs/label-dp-methods-mnist")
    args = parser.parse_args()

    jobs = []
    for name in args.methods:
        for epsilon in args.epsilons:
            fields = {"train": dataclasses.replace(MNIST_TRAIN), "model": MNIST_PROFILE_MODEL, **METHODS[name]}
            config = RunConfig(dataset="mnist", epsilon=epsilon, seed=args.seed, data_dir=args.data_dir, **fields)
            jobs.append(SweepJob(f"mnist/e{epsilon:g}/{name}/run{args.seed}", config))
    rows = run_sweep(jobs, args.out, workers=args.workers, data_dir=args.data_dir)
    print(
        f"\nMNIST test accuracy by label-DP method; epsilon from each run's ledger; seconds = wall time on "
        f"{torch.get_num_threads()} CPU threads ({platform.machine()}), {args.workers} run(s) at a time:\n"
    )
    # MNIST's labels are public research data: this diagnostic of PATE's answers reads them on purpose
    labels = unseal(load_dataset("mnist", args.data_dir).y_train) if "pate" in args.methods else None
    print(f"{'method':<16}{'epsilon':>8}{'delta':>7}{'accuracy %':>12}{'published %':>13}{'seconds':>9}  notes")
    for job, row in zip(jobs, rows):
        name = job.key.split("/")[2]
        if row["status"] != "done":
            print(f"{name:<16}{row['target_epsilon']:>8}  failed: {row['error']}")
            continue
        published = PUBLISHED.get((name, float(row["target_epsilon"])))
        print(
            f"{name:<16}{float(row['epsilon']):>8.3g}{float(row['delta']):>7.0e}"
            f"{100 * float(row['test_accuracy']):>12.2f}"
            f"{published if published is not None else '-':>13}{float(row['seconds']):>9.0f}  "
            f"{_pate_notes(row['run_dir'], labels) if name == 'pate' else ''}"
        )


def _pate_notes(run_dir: str, labels: np.ndarray) -> str:
    with np.load(f"{run_dir}/noisy_labels/pate.npz") as released:
        queries, answered, answers = released["queries"], released["answered"], released["labels"]
        noise = float(released["noise_std"])
    correct = (answers[answered] == labels[queries[answered]]).mean()
    return f"{queries.size} queries, vote noise {noise:.1f}, {100 * correct:.1f}% answers correct"


if __name__ == "__main__":
    main()
