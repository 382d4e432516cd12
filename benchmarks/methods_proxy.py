"""Which label-DP method at which epsilon, measured with the recipes set aside: ALIBI, LP-2ST (its default
first release and RR's), LP-MST and VLP's release alone, on the digits or on a public tenth of MNIST's
training rows, each cell over fresh releases.

Every run is what ``labeldp train --dataset D --method M --epsilon E --no-recipe --threads 1`` does: the
library's defaults (no recipe), the learning rate chosen on the run's own release
(:func:`labeldp.experiments.auto_tune.auto_tuned_run`, which runs :func:`labeldp.runs.train_run` on the
dataset given in memory), one torch thread, fresh noise (no ``--insecure-noise-seed``: each release is
secret and new), the public ``--seed`` 0. Runs go one at a time, in one process.

``--fraction`` keeps that share of the training rows, chosen by ``--subset-seed`` from their positions alone
(public: no label is read); the labels stay private (a view of the loaded ``PrivateLabels``), and the test
set is the dataset's whole one. The dataset is loaded again for each run: a release is drawn once per
loaded label column, so each run holds its own. Each run's dataset ledger goes to ``--budget-dir`` (default
OUT/budget): the releases of this benchmark compose there, not in your own ledger.

The variants (``--methods``): ``alibi``, ``lp-2st`` (its default first release: ``auto``), ``lp-2st-rr``
(``--first-release rr``), ``lp-2st-vlp`` (``--first-release vlp``), ``lp-mst`` (``auto``), ``vlp``. A finished
run in ``--out`` is read back; an interrupted one resumes from its saved release.

Usage: python benchmarks/methods_proxy.py [--dataset digits] [--fraction 1] [--epsilons 0.5 1 2 4]
[--releases 5] [--methods ...] [--data-dir DIR] [--out runs/methods-proxy]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import time
from pathlib import Path

import numpy as np
import torch

from labeldp.accounting.policy import BudgetPolicy
from labeldp.data import load_dataset
from labeldp.experiments.auto_tune import auto_tuned_run
from labeldp.runs import RunConfig

#: variant -> (method, its options typed)
VARIANTS: dict[str, tuple[str, dict[str, str]]] = {
    "alibi": ("alibi", {}),
    "lp-2st": ("lp-2st", {}),
    "lp-2st-rr": ("lp-2st", {"first_release": "rr"}),
    "lp-2st-vlp": ("lp-2st", {"first_release": "vlp"}),
    "lp-mst": ("lp-mst", {}),
    "vlp": ("vlp", {}),
}


def subset(data, fraction: float, seed: int):
    """``data`` with a ``fraction`` of its training rows, chosen by ``seed`` from their count alone."""
    if fraction >= 1:
        return data
    n = len(data.y_train)
    rows = np.sort(np.random.default_rng(seed).choice(n, size=round(fraction * n), replace=False))
    return dataclasses.replace(data, x_train=data.x_train[rows], y_train=data.y_train[rows])


def first_release(run_dir: Path) -> str:
    """Stage 1's release as the run took it (``config.json``), or ``-`` for a one-stage method."""
    config = json.loads((run_dir / "config.json").read_text())
    return str(config.get("first_release", "-"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="digits")
    parser.add_argument("--data-dir")
    parser.add_argument("--fraction", type=float, default=1.0, help="share of the training rows kept")
    parser.add_argument("--subset-seed", type=int, default=0, help="public seed choosing the rows kept")
    parser.add_argument("--epsilons", type=float, nargs="+", default=[0.5, 1.0, 2.0, 4.0])
    parser.add_argument("--methods", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--releases", type=int, default=5, help="fresh releases per cell")
    parser.add_argument("--out", default="runs/methods-proxy")
    parser.add_argument("--budget-dir", help="the dataset ledgers' folder (default OUT/budget)")
    args = parser.parse_args()

    torch.set_num_threads(1)
    out = Path(args.out) / f"{args.dataset}-{args.fraction:g}"
    policy = BudgetPolicy.from_environment(folder=args.budget_dir or Path(args.out) / "budget")
    start_load = os.getloadavg()
    cells: dict[tuple[str, float], list[dict]] = {}
    print(f"{'variant':<12}{'epsilon':>8}{'release':>8}{'test %':>8}{'seconds':>9}  first  lr   load", flush=True)
    for name in args.methods:
        method, options = VARIANTS[name]
        for epsilon in args.epsilons:
            for release in range(1, args.releases + 1):
                run_dir = out / f"{name}-e{epsilon:g}-r{release}"
                ran = not (run_dir / "summary.json").exists()
                if ran:
                    data = subset(load_dataset(args.dataset, args.data_dir), args.fraction, args.subset_seed)
                    config = RunConfig(
                        dataset=args.dataset, data_dir=args.data_dir, method=method, epsilon=epsilon, options=options
                    )
                    started = time.perf_counter()
                    auto_tuned_run(config, run_dir, progress=False, dataset=data, policy=policy)
                    wall = time.perf_counter() - started
                    (run_dir / "wall_seconds.json").write_text(json.dumps({"wall": wall}))
                summary = json.loads((run_dir / "summary.json").read_text())
                wall_path = run_dir / "wall_seconds.json"
                wall = json.loads(wall_path.read_text())["wall"] if wall_path.exists() else summary["seconds"]
                chosen = (summary.get("auto_tune") or {}).get("chosen_options", {}).get("lr", "-")
                row = {"accuracy": 100 * summary["test_accuracy"], "wall": wall, "first": first_release(run_dir)}
                cells.setdefault((name, epsilon), []).append(row)
                print(
                    f"{name:<12}{epsilon:>8g}{release:>8}{row['accuracy']:>8.2f}{wall:>9.1f}  {row['first']:<5}  "
                    f"{chosen}  {os.getloadavg()[0]:.2f}{'' if ran else ' (read back)'}",
                    flush=True,
                )
    rows_kept = len(subset(load_dataset(args.dataset, args.data_dir), args.fraction, args.subset_seed).y_train)
    print(
        f"\n{args.dataset}, {rows_kept} training rows, recipes set aside, one thread, one run at a time; "
        f"load average {start_load[0]:.2f} at the start, {os.getloadavg()[0]:.2f} at the end. Per cell: test "
        "accuracy mean and sample sd over the releases, their number, median seconds per run (wall, the tune's "
        "candidates included; the process's first run also pays torch's start):\n"
    )
    print_cells(cells, args.epsilons, args.methods)


def print_cells(cells: dict, epsilons, names) -> None:
    """The table of cells ``(name, epsilon) -> [{"accuracy", "wall", "first"}, ...]``: each cell's first
    release, accuracy mean and sample sd over its releases, their number, median seconds and each release."""
    print(f"{'epsilon':>7}  {'variant':<12}{'first':<7}{'mean %':>7}{'sd':>6}{'n':>3}{'seconds':>9}  releases %")
    for epsilon in epsilons:
        for name in names:
            cell = cells.get((name, epsilon), [])
            if not cell:
                continue
            accuracies = [r["accuracy"] for r in cell]
            sd = statistics.stdev(accuracies) if len(cell) > 1 else float("nan")
            firsts = "/".join(sorted({r["first"] for r in cell}))
            print(
                f"{epsilon:>7g}  {name:<12}{firsts:<7}{statistics.mean(accuracies):>7.2f}{sd:>6.2f}{len(cell):>3}"
                f"{statistics.median(r['wall'] for r in cell):>9.1f}  {' '.join(f'{a:.1f}' for a in accuracies)}"
            )


if __name__ == "__main__":
    main()
