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

With ``--defaults`` every row is instead the command a user types, with the defaults (MNIST's recipe of the
method where it has one, else the library's defaults and the learning rate chosen on the run's own release)
and fresh noise, one process per run::

    labeldp train --dataset mnist --data-dir DIR --method M --epsilon E [--first-release F] --threads T \
        --quiet --budget-dir OUT/budget --out OUT/V-eE-rR

for the variants of :data:`DEFAULT_VARIANTS` (``--variants``) and releases 1 to ``--releases``; its dataset
ledger goes to OUT/budget. A finished run is read back.

Usage: python benchmarks/label_dp_methods_mnist.py [--data-dir ../shared/datasets/mnist] [--epsilons 0.1 0.5 1 2]
       python benchmarks/label_dp_methods_mnist.py --defaults [--epsilons 4 0.5] [--variants alibi lp-2st ...]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch
from methods_proxy import print_cells

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
#: ``--defaults``: variant -> the flags of ``labeldp train`` besides the dataset and epsilon
DEFAULT_VARIANTS = {
    "alibi": ["--method", "alibi"],
    "lp-2st": ["--method", "lp-2st"],
    "lp-2st-rr": ["--method", "lp-2st", "--first-release", "rr"],
    "lp-2st-vlp": ["--method", "lp-2st", "--first-release", "vlp"],
    "lp-mst": ["--method", "lp-mst"],
    "vlp": ["--method", "vlp"],
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
    parser.add_argument("--defaults", action="store_true", help="each run `labeldp train` with the defaults")
    parser.add_argument("--variants", nargs="+", default=list(DEFAULT_VARIANTS), choices=list(DEFAULT_VARIANTS))
    parser.add_argument("--releases", type=int, default=1, help="--defaults: fresh releases per cell")
    parser.add_argument("--threads", type=int, default=1, help="--defaults: torch threads per run")
    args = parser.parse_args()
    if args.defaults:
        defaults_table(args)
        return

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


def defaults_table(args: argparse.Namespace) -> None:
    """Each row ``labeldp train`` with the defaults and fresh noise, one process at a time."""
    out = Path(args.out)
    load = os.getloadavg()[0]
    cells: dict[tuple[str, float], list[tuple[float, float, str]]] = {}
    print(f"{'variant':<12}{'epsilon':>8}{'release':>8}{'test %':>8}{'seconds':>9}  first  load", flush=True)
    for epsilon in args.epsilons:
        for name in args.variants:
            for release in range(1, args.releases + 1):
                run_dir = out / f"{name}-e{epsilon:g}-r{release}"
                wall_path = run_dir / "wall_seconds.json"
                if not (run_dir / "summary.json").exists():
                    argv = ["--dataset", "mnist", "--data-dir", args.data_dir, *DEFAULT_VARIANTS[name]]
                    argv += ["--epsilon", f"{epsilon:g}", "--threads", str(args.threads), "--quiet"]
                    argv += ["--budget-dir", str(out / "budget"), "--out", str(run_dir)]
                    started = time.perf_counter()
                    done = subprocess.run(
                        [sys.executable, "-m", "labeldp", "train", *argv], capture_output=True, text=True
                    )
                    if done.returncode != 0:
                        print(f"{run_dir.name}: failed: {(done.stderr or done.stdout).strip().splitlines()[-1:]}")
                        continue
                    wall_path.write_text(json.dumps({"wall": time.perf_counter() - started}))
                summary = json.loads((run_dir / "summary.json").read_text())
                wall = json.loads(wall_path.read_text())["wall"] if wall_path.exists() else float(summary["seconds"])
                first = str(json.loads((run_dir / "config.json").read_text()).get("first_release", "-"))
                accuracy = 100 * float(summary["test_accuracy"])
                cells.setdefault((name, epsilon), []).append({"accuracy": accuracy, "wall": wall, "first": first})
                print(
                    f"{name:<12}{epsilon:>8g}{release:>8}{accuracy:>8.2f}{wall:>9.0f}  {first:<5}  "
                    f"{os.getloadavg()[0]:.2f}",
                    flush=True,
                )
    print(
        f"\nMNIST, `labeldp train` with the defaults, fresh noise, --threads {args.threads}, one run at a time "
        f"({platform.machine()}); load average {load:.2f} at the start, {os.getloadavg()[0]:.2f} at the end. "
        "Per cell: test accuracy (mean and sd over the releases), their number, median wall seconds per run "
        "(the process's, startup included), each release:\n"
    )
    print_cells(cells, args.epsilons, args.variants)


def _pate_notes(run_dir: str, labels: np.ndarray) -> str:
    with np.load(f"{run_dir}/noisy_labels/pate.npz") as released:
        queries, answered, answers = released["queries"], released["answered"], released["labels"]
        noise = float(released["noise_std"])
    correct = (answers[answered] == labels[queries[answered]]).mean()
    return f"{queries.size} queries, vote noise {noise:.1f}, {100 * correct:.1f}% answers correct"


if __name__ == "__main__":
    main()
