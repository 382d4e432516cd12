"""LP-1ST and LP-2ST on MNIST next to Ghazi et al. (2021), with wall time per run.

The runs are the built-in profiles ``mnist/e{epsilon}/{method}/run{seed}`` executed by the sweep
runner, exactly as ``labeldp sweep --profiles ...`` would; finished runs in --out are read back and
unfinished ones resume. ``labeldp report OUT`` then draws the privacy-utility plot.

With ``--tuned`` every row is instead ``labeldp tune`` at that epsilon over ``--grid``: the options are
chosen on that row's own release (held-out released labels; LP-2ST's on its first stage), so the
row's ledger epsilon is everything it did, tuning included, and its seconds are the tune's (every
candidate and the final run).

Usage: python benchmarks/mnist_table.py [--data-dir ../shared/datasets/mnist] [--epsilons 1 2 4] [--tuned]
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

import torch

from labeldp.experiments.sweep_runner import SweepJob, run_sweep
from labeldp.recipes import get_profile
from labeldp.recipes.builtin_profiles import PAPER_ACCURACY

#: Test accuracy (%) reported by Ghazi et al. (NeurIPS 2021) for MNIST.
PAPER = {method: figures for (dataset, method), figures in PAPER_ACCURACY.items() if dataset == "mnist"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default="../shared/datasets/mnist")
    parser.add_argument("--epsilons", type=float, nargs="+", default=[1.0, 2.0, 4.0])
    parser.add_argument("--methods", nargs="+", default=["lp-1st", "lp-2st"], choices=sorted(PAPER))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--workers", type=int, default=1, help="parallel runs (each then gets fewer threads)")
    parser.add_argument("--out", default=None, help="default runs/paper-mnist (runs/paper-mnist-tuned with --tuned)")
    parser.add_argument("--tuned", action="store_true", help="each row a labeldp tune on its own release")
    parser.add_argument("--grid", nargs="+", default=["lr=0.05,0.1", "epochs=8,12"], help="the tune's grid")
    args = parser.parse_args()
    if args.tuned:
        tuned_table(args)
        return
    args.out = args.out or "runs/paper-mnist"

    keys = [f"mnist/e{e:g}/{m}/run{s}" for m in args.methods for e in args.epsilons for s in args.seeds]
    jobs = [SweepJob(key, get_profile(key).config) for key in keys]
    rows = run_sweep(jobs, args.out, workers=args.workers, data_dir=args.data_dir)
    print(
        f"\nMNIST test accuracy; epsilon from each run's ledger; seconds = wall time of the run on "
        f"{torch.get_num_threads()} CPU threads ({platform.machine()}), {args.workers} run(s) at a time:\n"
    )
    print(f"{'method':<8}{'epsilon':>8}{'seed':>6}{'labeldp %':>11}{'paper %':>9}{'diff':>7}{'seconds':>9}")
    for row in rows:
        if row["status"] != "done":
            print(f"{row['method']:<8}{row['target_epsilon']:>8}{row['seed']:>6}  failed: {row['error']}")
            continue
        ours = 100 * float(row["test_accuracy"])
        paper = PAPER[row["method"]].get(float(row["target_epsilon"]))
        diff = f"{ours - paper:+.2f}" if paper is not None else ""
        print(
            f"{row['method']:<8}{float(row['epsilon']):>8.3g}{row['seed']:>6}{ours:>11.2f}"
            f"{paper if paper is not None else '-':>9}{diff:>7}{float(row['seconds']):>9.0f}"
        )


def tuned_table(args: argparse.Namespace) -> None:
    """Each row ``labeldp tune`` on its own release, as a user would type it."""
    out = Path(args.out or "runs/paper-mnist-tuned")
    rows = []
    for method in args.methods:
        for epsilon in args.epsilons:
            for seed in args.seeds:
                folder = out / f"{method}-e{epsilon:g}-seed{seed}"
                started, ran = time.perf_counter(), not (folder / "tune.json").exists()
                if ran:
                    subprocess.run(
                        [
                            sys.executable,
                            "-m",
                            "labeldp",
                            "tune",
                            "--dataset",
                            "mnist",
                            "--data-dir",
                            args.data_dir,
                            "--method",
                            method,
                            "--epsilon",
                            f"{epsilon:g}",
                            "--seed",
                            str(seed),
                            "--grid",
                            *args.grid,
                            "--quiet",
                            "--out",
                            str(folder),
                        ],
                        check=True,
                    )
                seconds = time.perf_counter() - started if ran else 0.0
                outcome = json.loads((folder / "tune.json").read_text())
                rows.append((method, epsilon, seed, outcome, seconds))
    print(
        f"\nMNIST, each row tuned on its own release over {' '.join(args.grid)}; epsilon from the tune folder's "
        f"ledger (everything the row did); seconds: the whole tune (0: read back), and its final run, on "
        f"{torch.get_num_threads()} CPU threads ({platform.machine()}):\n"
    )
    print(
        f"{'method':<8}{'epsilon':>8}{'seed':>6}  {'chosen':<18}{'labeldp %':>10}{'paper %':>9}{'diff':>7}"
        f"{'tune s':>8}{'run s':>7}"
    )
    for method, epsilon, seed, outcome, seconds in rows:
        final = outcome["final"]
        ours = 100 * float(final["test_accuracy"])
        paper = PAPER[method].get(float(epsilon))
        diff = f"{ours - paper:+.2f}" if paper is not None else ""
        chosen = ",".join(f"{k}={v}" for k, v in outcome["chosen_options"].items())
        print(
            f"{method:<8}{outcome['ledger_epsilon']:>8.3g}{seed:>6}  {chosen:<18}{ours:>10.2f}"
            f"{paper if paper is not None else '-':>9}{diff:>7}{seconds:>8.0f}{float(final['seconds']):>7.0f}"
        )


if __name__ == "__main__":
    main()
