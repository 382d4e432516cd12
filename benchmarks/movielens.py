"""Label DP for ratings: MovieLens 100K's test RMSE by method and epsilon, with the relative RMSE
increase over our own non-private model next to the paper's MovieLens-1M figures.

Methods (all on the rating grid 1..5, the MovieLens recipe of the built-in profiles
``movielens/e{eps}/{method}/run{seed}``: the recommender model, AdamW, early stopping on held-out
*released* ratings):

- ``rr``: randomized response over the five ratings (``lp-1st``);
- ``rr-on-bins``: a noisy histogram prior over the grid (``prior_epsilon`` of epsilon), then
  RR-on-bins with the rest, one stage;
- ``rr-on-bins-mst``: RR-on-bins in two stages (0.4, 0.6), the second stage's priors from the model;
- ``laplace``: discrete Laplace noise on the rating (``laplace-regression``);
- ``non-private``: the same model on the true ratings, the reference of the relative increase.

The paper's figures (Ghazi et al., "Deep Learning with Label Differential Privacy", NeurIPS 2021,
MovieLens-1M, relative test RMSE increase over their non-private model) are printed beside ours;
they are on the larger dataset and another model, so the comparison is of the relative increase
only. Like the paper, the benchmark treats the held-out test ratings as public (``--test-labels
public``: exact test errors, which the runs' epsilon does not cover); a run with the defaults estimates
them from a release instead. The noise is drawn from fresh OS entropy, as a private run draws it; every run uses one CPU
thread and runs alone. The machine's load average is printed before and after.

    python benchmarks/movielens.py [--data-dir ../shared/datasets/movielens-100k] [--epsilons 0.5 1 2 4 8]
        [--seeds 1] [--out runs/benchmark-movielens]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from labeldp.data import load_dataset
from labeldp.recipes.builtin_profiles import movielens_config
from labeldp.runs import train_run

#: table name -> method
METHODS = {
    "rr": "lp-1st",
    "rr-on-bins": "rr-on-bins",
    "rr-on-bins-mst": "rr-on-bins-mst",
    "laplace": "laplace-regression",
}
#: the paper's MovieLens-1M relative RMSE increases (%) over non-private, by (method, epsilon)
PAPER = {
    ("LP-2ST", 1.0): 19.0,
    ("LP-2ST", 2.0): 6.9,
    ("LP-2ST", 4.0): 0.7,
    ("LP-1ST", 1.0): 29.0,
    ("LP-1ST", 2.0): 13.0,
    ("LP-1ST", 4.0): 1.0,
}
DEFAULT_DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "datasets" / "movielens-100k"


def run_one(method: str, epsilon: float | None, seed: int, data, data_dir: str, out: Path) -> dict:
    config = movielens_config(method, epsilon, seed)
    config = dataclasses.replace(config, data_dir=data_dir, test_labels="public")  # as the published figures
    folder = out / ("non-private" if epsilon is None else f"e{epsilon:g}") / method / f"run{seed}"
    start = time.perf_counter()
    summary = train_run(config, folder, device="cpu", progress=False, dataset=data)
    return {**summary, "wall": time.perf_counter() - start}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", default=str(DEFAULT_DATA.resolve()))
    parser.add_argument("--epsilons", type=float, nargs="+", default=[0.5, 1, 2, 4, 8])
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", default=None, help="run folders (default: a temporary folder, deleted after)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    temporary = tempfile.TemporaryDirectory() if args.out is None else None
    out = Path(args.out or temporary.name)
    print(
        f"load average at start: {', '.join(f'{x:.2f}' for x in os.getloadavg())} (1, 5, 15 min) on "
        f"{os.cpu_count()} cores; {args.threads} torch thread(s), one run at a time; {args.seeds} seed(s)"
        + (" (one seed: no spread)" if args.seeds == 1 else ""),
        flush=True,
    )
    datasets = {
        seed: load_dataset("movielens", args.data_dir, split_seed=seed, public_test=True) for seed in range(args.seeds)
    }
    first = datasets[0]
    print(f"MovieLens: {len(first.y_train)} training and {len(first.y_test)} test ratings\n", flush=True)

    results: dict[tuple[str, float | None], list[dict]] = {}
    plan = [("non-private", None)] + [(name, e) for e in args.epsilons for name in args.methods]
    print(f"{'method':<16}{'epsilon':>8}{'ledger eps':>11}{'RMSE':>9}{'MAE':>8}{'seconds':>9}{'load':>6}", flush=True)
    for name, epsilon in plan:
        method = "non-private" if epsilon is None else METHODS[name]
        for seed in range(args.seeds):
            row = run_one(method, epsilon, seed, datasets[seed], args.data_dir, out)
            results.setdefault((name, epsilon), []).append(row)
            print(
                f"{name:<16}{'-' if epsilon is None else f'{epsilon:g}':>8}"
                f"{'-' if row['epsilon'] is None else format(row['epsilon'], '.3g'):>11}{row['test_rmse']:>9.4f}"
                f"{row['test_mae']:>8.4f}{row['wall']:>9.1f}{os.getloadavg()[0]:>6.2f}",
                flush=True,
            )

    reference = np.mean([r["test_rmse"] for r in results[("non-private", None)]])
    print(
        f"\nTest RMSE (mean over {args.seeds} seed(s)) and relative increase over our non-private model "
        f"(RMSE {reference:.4f}):\n"
    )
    header = f"{'method':<16}" + "".join(f"{f'eps {e:g}':>16}" for e in args.epsilons)
    print(header)
    for name in args.methods:
        cells = []
        for epsilon in args.epsilons:
            rmse = np.mean([r["test_rmse"] for r in results[(name, epsilon)]])
            cells.append(f"{rmse:.4f} {100 * (rmse / reference - 1):+6.1f}%")
        print(f"{name:<16}" + "".join(f"{c:>16}" for c in cells))
    for paper in ("LP-1ST", "LP-2ST"):
        cells = [f"{PAPER[(paper, e)]:+.1f}%" if (paper, e) in PAPER else "-" for e in args.epsilons]
        print(f"{'paper ' + paper:<16}" + "".join(f"{c:>16}" for c in cells))
    print("(paper: MovieLens-1M, relative to the paper's own non-private model)")

    targets = [e for e in args.epsilons if ("LP-2ST", e) in PAPER]
    if targets:
        print(
            "\nTarget: a smaller relative increase than the paper's LP-2ST at epsilon "
            + ", ".join(f"{e:g}" for e in targets)
            + ", each run under 10 minutes:"
        )
        for name in args.methods:
            verdicts = []
            for epsilon in targets:
                rmse = np.mean([r["test_rmse"] for r in results[(name, epsilon)]])
                increase = 100 * (rmse / reference - 1)
                verdicts.append(f"eps {epsilon:g} {'met' if increase < PAPER[('LP-2ST', epsilon)] else 'missed'}")
            slowest = max(r["wall"] for e in args.epsilons for r in results[(name, e)])
            print(f"  {name:<16}{'; '.join(verdicts)}; slowest run {slowest:.0f} s")
    print(f"\nload average at the end: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if temporary is not None:
        temporary.cleanup()


if __name__ == "__main__":
    main()
